"""The task-environment protocol and the single-turn environment every built-in one is.

In the spirit of vlm-gym's ``BaseEnv``: ``reset(index)`` starts an episode on one item and
returns its state and observation; ``step(state, completion)`` grades the model's reply and
says whether the episode is done. Single-turn episodes end after one step; the ``state`` and
``observation`` fields of :class:`StepResult` leave room for multi-turn environments.

>>> from aerorl_ops.envs.exact_match_grader import ExactMatchGrader
>>> from aerorl_ops.envs.types import Completion, TaskData, TaskItem
>>> item = TaskItem("q1", "demo", "test", "demo.jsonl", "2+2?", ("4",), (), ())
>>> env = SingleTurnEnv("demo", TaskData([item]), ExactMatchGrader())
>>> state = EpisodeState(0, "q1")
>>> result = env.step(state, Completion("4."))
>>> result.reward, result.done, result.info.correct
(1.0, True, True)
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from aerorl_ops.envs.types import (
    Completion,
    EnvCounts,
    EpisodeState,
    Observation,
    StepInfo,
    StepResult,
    TaskData,
    TaskItem,
    observe,
)
from aerorl_ops.rows.load_result import RejectedRow


class Grader(Protocol):
    """Scores one reply to one item: the shaped reward, and the info that explains it."""

    def __call__(self, item: TaskItem, completion: Completion) -> tuple[float, StepInfo]: ...


@runtime_checkable
class TaskEnv(Protocol):
    """What a trainer or evaluator may rely on in any environment."""

    name: str
    rejected: list[RejectedRow]

    def __len__(self) -> int: ...

    def reset(self, index: int) -> tuple[EpisodeState, Observation]: ...

    def step(self, state: EpisodeState, completion: Completion) -> StepResult: ...

    def question_type(self, index: int) -> str | None: ...

    @property
    def counts(self) -> EnvCounts: ...


class SingleTurnEnv:
    """A fixed list of items, one question per episode, graded by ``grader``."""

    def __init__(self, name: str, data: TaskData, grader: Grader) -> None:
        self.name = name
        self.items: tuple[TaskItem, ...] = tuple(data.items)
        self.rejected: list[RejectedRow] = list(data.rejected)
        self.grader = grader

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        _, accepted, rejected = self.counts
        return f"{type(self).__name__}({self.name!r}, items={accepted}, rejected={rejected})"

    @property
    def counts(self) -> EnvCounts:
        return EnvCounts(read=len(self.items) + len(self.rejected), accepted=len(self.items),
                         rejected=len(self.rejected))

    def item(self, index: int) -> TaskItem:
        if not 0 <= index < len(self.items):
            raise IndexError(f"environment {self.name!r}: index {index} is out of range; it holds "
                             f"{len(self.items)} items (0..{len(self.items) - 1})")
        return self.items[index]

    def question_type(self, index: int) -> str | None:
        return self.item(index).question_type

    def reset(self, index: int) -> tuple[EpisodeState, Observation]:
        item = self.item(index)
        return EpisodeState(index=index, item_id=item.item_id), observe(item)

    def step(self, state: EpisodeState, completion: Completion) -> StepResult:
        item = self.item(state.index)
        if item.item_id != state.item_id:
            raise ValueError(f"environment {self.name!r}: state is for item {state.item_id!r} but index "
                             f"{state.index} holds {item.item_id!r}; pass a state this environment's reset returned")
        if state.turn != 0:
            raise ValueError(f"environment {self.name!r}: episode on item {item.item_id!r} is already done "
                             f"(turn {state.turn}); single-turn episodes take one step, call reset again")
        reward, info = self.grader(item, completion)
        return StepResult(reward=reward, done=True, info=info)
