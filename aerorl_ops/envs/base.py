"""The task-environment protocol and the single-turn environment every built-in one is.

In the spirit of vlm-gym's ``BaseEnv``: ``reset(item)`` starts an episode on one of the environment's
items and returns its state and observation; ``step(state, completion)`` grades the model's reply and
says whether the episode is done. The state carries the item, so nothing is looked up again.
Single-turn episodes end after one step; the ``state`` and ``observation`` fields of
:class:`StepResult` leave room for multi-turn environments. Whoever drives an environment by position
(a sampler drawing indices, an evaluation over a held-out sample) turns its indices into items once,
with :func:`items_at`.

>>> from aerorl_ops.envs.exact_match_grader import ExactMatchGrader
>>> from aerorl_ops.envs.types import Completion
>>> from aerorl_ops.rows.load_result import LoadResult
>>> from aerorl_ops.rows.task_item import TaskItem
>>> item = TaskItem("q1", "demo", "test", "demo.jsonl", "2+2?", ("4",), ())
>>> env = SingleTurnEnv("demo", LoadResult([item]), ExactMatchGrader())
>>> state, _ = env.reset(item)
>>> result = env.step(state, Completion("4."))
>>> result.reward, result.done, result.info.correct
(1.0, True, True)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from aerorl_ops.envs.types import (
    Completion,
    EnvCounts,
    EpisodeState,
    Observation,
    StepInfo,
    StepResult,
    observe,
)
from aerorl_ops.rows.load_result import LoadResult, RejectedRow
from aerorl_ops.rows.task_item import TaskItem


class Grader(Protocol):
    """Scores one reply to one item: the shaped reward, and the info that explains it."""

    def __call__(self, item: TaskItem, completion: Completion) -> tuple[float, StepInfo]: ...


@runtime_checkable
class TaskEnv(Protocol):
    """What a trainer or evaluator may rely on in any environment."""

    name: str
    rejected: list[RejectedRow]

    @property
    def items(self) -> tuple[TaskItem, ...]: ...

    def __len__(self) -> int: ...

    def reset(self, item: TaskItem) -> tuple[EpisodeState, Observation]: ...

    def step(self, state: EpisodeState, completion: Completion) -> StepResult: ...

    def question_type(self, index: int) -> str | None: ...

    @property
    def counts(self) -> EnvCounts: ...


def max_turns(env: TaskEnv) -> int:
    """The environment's turns per episode at most (1 for a single-turn one)."""
    return int(getattr(env, "max_turns", 1))


def demonstration(env: TaskEnv, item: TaskItem) -> tuple[str, ...] | None:
    """The replies, one per turn, that play ``item``'s episode well, when ``env`` knows them (a multi-turn
    environment with a planner, ``planned_actions``: MiniGrid's shortest path); None when it does not (a
    single-turn environment's demonstration is its item's answer)."""
    planned = getattr(env, "planned_actions", None)
    return planned(item) if planned is not None and max_turns(env) > 1 else None


def items_at(env: TaskEnv, indices: Iterable[int]) -> list[TaskItem]:
    """The items of ``env`` at ``indices``, in order; an index out of range is an ``IndexError`` naming
    the environment and its range."""
    items = env.items
    chosen = []
    for index in indices:
        if not 0 <= index < len(items):
            raise IndexError(f"environment {env.name!r}: index {index} is out of range; it holds "
                             f"{len(items)} items (0..{len(items) - 1})")
        chosen.append(items[index])
    return chosen


class HeldItems:
    """What every environment over a fixed list of items has: its size, its counts (read, accepted,
    rejected) and each item's question type. Needs ``items`` and ``rejected``."""

    items: tuple[TaskItem, ...]
    rejected: list[RejectedRow]

    def __len__(self) -> int:
        return len(self.items)

    @property
    def counts(self) -> EnvCounts:
        return EnvCounts(read=len(self.items) + len(self.rejected), accepted=len(self.items),
                         rejected=len(self.rejected))

    def question_type(self, index: int) -> str | None:
        return items_at(self, [index])[0].question_type


class SingleTurnEnv(HeldItems):
    """A fixed list of items, one question per episode, graded by ``grader``."""

    def __init__(self, name: str, data: LoadResult, grader: Grader) -> None:
        self.name = name
        self.items: tuple[TaskItem, ...] = tuple(data.items)
        self.rejected: list[RejectedRow] = list(data.rejected)
        self.grader = grader

    def __repr__(self) -> str:
        _, accepted, rejected = self.counts
        return f"{type(self).__name__}({self.name!r}, items={accepted}, rejected={rejected})"

    def reset(self, item: TaskItem) -> tuple[EpisodeState, Observation]:
        return EpisodeState(item), observe(item)

    def step(self, state: EpisodeState, completion: Completion) -> StepResult:
        if state.turn != 0:
            raise ValueError(f"environment {self.name!r}: episode on item {state.item.item_id!r} is already done "
                             f"(turn {state.turn}); single-turn episodes take one step, call reset again")
        reward, info = self.grader(state.item, completion)
        return StepResult(reward=reward, done=True, info=info)
