"""Environments by name: ``make_env("easy_vqa", split="test", limit=500, seed=0)``.

A factory is any callable taking keyword settings and returning a :class:`TaskEnv`; its
named parameters are the settings it accepts (a ``**kwargs`` adds none). An unknown name is
an error listing the known ones; an unknown setting, or a missing required one, is an error
naming it and listing the settings that environment takes.

>>> sorted(ENVIRONMENTS)  # doctest: +NORMALIZE_WHITESPACE
['arc', 'chartqa', 'docvqa', 'easy_vqa', 'easy_vqa_combinations', 'easy_vqa_pairs', 'easy_vqa_two_tries',
 'gymnasium', 'jsonl', 'mixture', 'parquet']
>>> env_settings("jsonl")[:3]
('path', 'split', 'limit')
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from aerorl_ops.config.dataset_kinds import DatasetKinds, KindCheck
from aerorl_ops.envs.arc import arc_env
from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.envs.benchmark_tasks import chartqa_env, docvqa_env
from aerorl_ops.envs.easy_vqa import easy_vqa_env
from aerorl_ops.envs.easy_vqa_combinations import easy_vqa_combinations_env
from aerorl_ops.envs.easy_vqa_pairs import check_pairs_table, easy_vqa_pairs_env
from aerorl_ops.envs.gymnasium_env import gymnasium_env
from aerorl_ops.envs.jsonl_task import jsonl_env
from aerorl_ops.envs.mixture import mixture_env
from aerorl_ops.envs.parquet_task import parquet_env
from aerorl_ops.envs.two_tries import easy_vqa_two_tries_env

EnvFactory = Callable[..., TaskEnv]

ENVIRONMENTS: dict[str, EnvFactory] = {
    "easy_vqa": easy_vqa_env,
    "easy_vqa_two_tries": easy_vqa_two_tries_env,
    "easy_vqa_pairs": easy_vqa_pairs_env,
    "easy_vqa_combinations": easy_vqa_combinations_env,
    "docvqa": docvqa_env,
    "chartqa": chartqa_env,
    "jsonl": jsonl_env,
    "parquet": parquet_env,
    "arc": arc_env,
    "gymnasium": gymnasium_env,
    "mixture": mixture_env,  # its parts: other dataset tables (envs.configured gives their builders)
}


KIND_CHECKS: dict[str, KindCheck] = {"easy_vqa_pairs": check_pairs_table}
"""The kinds that check a dataset table's values when the config loads (``config.dataset_kinds.check_datasets``)."""


class UnknownEnvironmentError(ValueError):
    """No environment is registered under the name asked for."""


class EnvSettingsError(ValueError):
    """The keyword settings do not fit the environment's factory."""


def register_env(name: str, factory: EnvFactory) -> None:
    """Make ``factory`` available as ``make_env(name, ...)``; a name is registered once."""
    if name in ENVIRONMENTS:
        raise ValueError(f"an environment named {name!r} is already registered ({ENVIRONMENTS[name]!r})")
    ENVIRONMENTS[name] = factory


def _factory(name: str) -> EnvFactory:
    try:
        return ENVIRONMENTS[name]
    except KeyError:
        known = ", ".join(sorted(ENVIRONMENTS))
        raise UnknownEnvironmentError(f"unknown environment {name!r}; known environments: {known}") from None


def _parameters(name: str) -> dict[str, inspect.Parameter]:
    return {key: value for key, value in inspect.signature(_factory(name)).parameters.items()
            if value.kind in (value.POSITIONAL_OR_KEYWORD, value.KEYWORD_ONLY)}


def env_settings(name: str) -> tuple[str, ...]:
    """The keyword settings environment ``name`` accepts, in its factory's order."""
    return tuple(_parameters(name))


def check_settings(name: str, settings: dict[str, Any]) -> None:
    """Raise :class:`EnvSettingsError` when ``settings`` would not fit environment ``name``."""
    parameters = _parameters(name)
    accepted = ", ".join(parameters)
    for setting in settings:
        if setting not in parameters:
            raise EnvSettingsError(f"environment {name!r} has no setting {setting!r}; its settings are: {accepted}")
    for parameter in parameters.values():
        if parameter.default is inspect.Parameter.empty and parameter.name not in settings:
            raise EnvSettingsError(f"environment {name!r} needs the setting {parameter.name!r}; "
                                   f"its settings are: {accepted}")


def dataset_kinds() -> DatasetKinds:
    """The registered kinds with their settings, as the config check takes them (``check_datasets``)."""
    return DatasetKinds({name: env_settings(name) for name in ENVIRONMENTS}, KIND_CHECKS)


def make_env(name: str, /, **settings: Any) -> TaskEnv:
    """Build the environment registered as ``name`` with keyword ``settings`` (which may include ``name``)."""
    check_settings(name, settings)
    return _factory(name)(**settings)
