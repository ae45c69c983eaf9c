"""An environment around another one: what the wrapper does not change is the wrapped environment's."""

from __future__ import annotations

from aerorl_ops.envs.base import TaskEnv, demonstration
from aerorl_ops.envs.types import Completion, EnvCounts, EpisodeState, Observation, StepResult
from aerorl_ops.rows.task_item import TaskItem


class WrappedEnv:
    """Every ``TaskEnv`` method and attribute of ``env`` (and its ``max_turns``); a subclass overrides
    what it changes (``envs.judged.JudgedEnv`` grades with a judge too, ``envs.two_tries.TwoTriesEnv``
    adds a second turn)."""

    def __init__(self, env: TaskEnv, name: str = "") -> None:
        self.env = env
        self.name = name or env.name
        self.rejected = env.rejected

    def __len__(self) -> int:
        return len(self.env)

    @property
    def max_turns(self) -> int:
        return int(getattr(self.env, "max_turns", 1))

    @property
    def items(self) -> tuple[TaskItem, ...]:
        return self.env.items

    @property
    def counts(self) -> EnvCounts:
        return self.env.counts

    def planned_actions(self, item: TaskItem) -> tuple[str, ...] | None:
        """The wrapped environment's demonstration of ``item``'s episode (``envs.base.demonstration``)."""
        return demonstration(self.env, item)

    def question_type(self, index: int) -> str | None:
        return self.env.question_type(index)

    def reset(self, item: TaskItem) -> tuple[EpisodeState, Observation]:
        return self.env.reset(item)

    def step(self, state: EpisodeState, completion: Completion) -> StepResult:
        return self.env.step(state, completion)
