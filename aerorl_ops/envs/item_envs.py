"""Each registered kind's environment over items already read (those of a cached rows table).

A factory of ``envs.registry`` reads its source and wraps the items it accepted in the kind's
environment: its name, its grader and, for ``easy_vqa_two_tries``, its wrapper. ``items_env`` builds
that same environment around items read elsewhere, from the same ``make_env`` settings; the settings
that only say what to read (split, limit, seed, files, instruction, ...) have no part in it. A
setting left out takes its factory's default. A kind registered without an entry here has none:
``items_env`` returns None and the caller reads the source.

>>> from aerorl_ops.rows.load_result import LoadResult
>>> env = items_env("easy_vqa_two_tries", {"second_try_reward": 0.25}, LoadResult())
>>> type(env).__name__, env.name, env.second_try_reward, env.show_images_again
('TwoTriesEnv', 'easy_vqa_two_tries', 0.25, False)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from aerorl_ops.envs.arc import NAME as ARC
from aerorl_ops.envs.arc import ArcGrader
from aerorl_ops.envs.base import SingleTurnEnv, TaskEnv
from aerorl_ops.envs.easy_vqa import NAME as EASY_VQA
from aerorl_ops.envs.easy_vqa_combinations import NAME as EASY_VQA_COMBINATIONS
from aerorl_ops.envs.easy_vqa_pairs import NAME as EASY_VQA_PAIRS
from aerorl_ops.envs.exact_match_grader import ExactMatchGrader
from aerorl_ops.envs.gymnasium_env import items_gymnasium_env
from aerorl_ops.envs.registry import ENVIRONMENTS
from aerorl_ops.envs.reward_stack_grader import RewardStackGrader
from aerorl_ops.envs.two_tries import TwoTriesEnv
from aerorl_ops.rewards.stack import build_reward_stack
from aerorl_ops.rows.load_result import LoadResult

ItemsEnv = Callable[[str, Mapping[str, Any], LoadResult], TaskEnv]
"""Called with the kind, its ``make_env`` settings and the items (with their rejections)."""


def _setting(kind: str, settings: Mapping[str, Any], name: str) -> Any:
    """``settings[name]``, else the default of the kind's factory (written once, there)."""
    if name in settings:
        return settings[name]
    return inspect.signature(ENVIRONMENTS[kind]).parameters[name].default


def _easy_vqa(kind: str, settings: Mapping[str, Any], data: LoadResult) -> TaskEnv:
    return SingleTurnEnv(EASY_VQA, data, ExactMatchGrader())


def _easy_vqa_combinations(kind: str, settings: Mapping[str, Any], data: LoadResult) -> TaskEnv:
    return SingleTurnEnv(_setting(kind, settings, "name") or EASY_VQA_COMBINATIONS, data, ExactMatchGrader())


def _easy_vqa_pairs(kind: str, settings: Mapping[str, Any], data: LoadResult) -> TaskEnv:
    return SingleTurnEnv(EASY_VQA_PAIRS, data, ExactMatchGrader())


def _two_tries(kind: str, settings: Mapping[str, Any], data: LoadResult) -> TaskEnv:
    return TwoTriesEnv(_easy_vqa(kind, settings, data), second_try_reward=_setting(kind, settings, "second_try_reward"),
                       show_images_again=_setting(kind, settings, "show_images_again"))


def _benchmark(kind: str, settings: Mapping[str, Any], data: LoadResult) -> TaskEnv:
    stack = _setting(kind, settings, "reward_stack")
    return SingleTurnEnv(kind, data, RewardStackGrader(stack if stack is not None else
                                                       build_reward_stack(require_json=True)))


def _file(kind: str, settings: Mapping[str, Any], data: LoadResult) -> TaskEnv:
    return SingleTurnEnv(_setting(kind, settings, "name") or Path(settings["path"]).stem, data, ExactMatchGrader())


def _gymnasium(kind: str, settings: Mapping[str, Any], data: LoadResult) -> TaskEnv:
    return items_gymnasium_env(settings, data)


def _arc(kind: str, settings: Mapping[str, Any], data: LoadResult) -> TaskEnv:
    return SingleTurnEnv(_setting(kind, settings, "name") or ARC, data, ArcGrader(_setting(kind, settings, "reward")))


ITEM_ENVS: dict[str, ItemsEnv] = {
    "easy_vqa": _easy_vqa,
    "easy_vqa_two_tries": _two_tries,
    "easy_vqa_pairs": _easy_vqa_pairs,
    "easy_vqa_combinations": _easy_vqa_combinations,
    "docvqa": _benchmark,
    "chartqa": _benchmark,
    "jsonl": _file,
    "parquet": _file,
    "arc": _arc,
    "gymnasium": _gymnasium,
}


def items_env(kind: str, settings: Mapping[str, Any], data: LoadResult) -> TaskEnv | None:
    """The environment ``make_env(kind, **settings)`` would be, holding ``data`` (items and rejections)
    instead of what its source gives; None for a kind without an entry in ``ITEM_ENVS``."""
    build = ITEM_ENVS.get(kind)
    return build(kind, settings, data) if build is not None else None
