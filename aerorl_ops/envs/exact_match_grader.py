"""Exact-match grading: the reward of easy-VQA and of user JSONL / Parquet tasks.

The answer extraction and matching rules are ``aerorl_ops.text.exact_match``.
"""

from __future__ import annotations

from dataclasses import dataclass

from aerorl_ops.envs.types import Completion, StepInfo
from aerorl_ops.rows.task_item import TaskItem
from aerorl_ops.text.exact_match import answers_match, predicted_answer


@dataclass(frozen=True)
class ExactMatchGrader:
    """Reward 1.0 when the reply's answer matches an alias after normalisation, else 0.0.

    The one component is ``exact_match``; ``correct`` is the same test.
    """

    def __call__(self, item: TaskItem, completion: Completion) -> tuple[float, StepInfo]:
        prediction = predicted_answer(completion.text)
        correct = answers_match(prediction, item.answers)
        reward = 1.0 if correct else 0.0
        return reward, StepInfo(components={"exact_match": reward}, correct=correct, prediction=prediction)
