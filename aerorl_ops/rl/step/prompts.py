"""The prompts of an RL step: each row's task item, carried through sampling, dynamic sampling, a token
budget's cut, the loss and the rollout log, so no stage looks an item up again.

The sampler (``rl.step.schedule.ItemSampler``) draws environment indices; the rollout turns each round's
draw into prompts once, at its start (:func:`drawn_prompts`). A prompt's ``group`` is the index it was
drawn as: the replies to it form one group for group-relative advantages, and two draws of one item in a
step share a group, as they always did.

>>> from aerorl_ops.envs.base import SingleTurnEnv
>>> from aerorl_ops.envs.exact_match_grader import ExactMatchGrader
>>> from aerorl_ops.rows.load_result import LoadResult
>>> from aerorl_ops.rows.task_item import TaskItem
>>> items = [TaskItem(f"q{k}", "demo", "train", "demo.jsonl", "Q?", ("a",), ()) for k in range(3)]
>>> [(p.group, p.item.item_id) for p in drawn_prompts(SingleTurnEnv("demo", LoadResult(items), ExactMatchGrader()),
...                                                   [2, 0, 2])]
[(2, 'q2'), (0, 'q0'), (2, 'q2')]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from aerorl_ops.envs.base import TaskEnv, items_at
from aerorl_ops.rows.task_item import TaskItem


class Prompt(NamedTuple):
    """One row's question: the group its replies share for advantages, and the task item."""

    group: int  # the environment index it was drawn as
    item: TaskItem


def drawn_prompts(env: TaskEnv, indices: Sequence[int]) -> list[Prompt]:
    """The prompts of the environment ``indices`` a sampler drew, in order: each index's item, looked up here once."""
    return [Prompt(index, item) for index, item in zip(indices, items_at(env, indices), strict=True)]


def prompt_items(prompts: Sequence[Prompt]) -> list[TaskItem]:
    """The task items of ``prompts``, in order."""
    return [prompt.item for prompt in prompts]
