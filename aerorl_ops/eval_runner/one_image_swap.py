"""The one-image swap check: does a policy's answer follow a change of one of the item's images?

``held_out.image_swap_check`` shows each question every image of another question; here each item
is paired with a copy of itself in which ONE image is replaced (``envs.easy_vqa_pairs.swapped_items``:
the right image, by one of another shape and colour, chosen to change the statement's truth where one
can). The policy answers both, greedily, and the check counts how often its answer changes: overall,
and among the items whose true answer the new image changes (a policy that reads that image changes
these; one that ignores the images changes none). Answers are compared as ``reading`` reads a reply
(by default the graded answer, normalised; for true/false items ``envs.pair_statements.reply_truth``,
so "yes" and "true" are one answer).

A policy here is any function from observations to reply texts: :func:`policy_replies` for a loaded
model, a stub in tests.

>>> from aerorl_ops.rows.task_item import TaskItem
>>> own = TaskItem("q", "demo", "test", "d", "Is it red?", ("yes",), ())
>>> other = TaskItem("q-swapped", "demo", "test", "d", "Is it red?", ("no",), ())
>>> check = one_image_swap_check(lambda observations: ["yes"] * len(observations), [(own, other)])
>>> check.answers_changed, check.labels_changed, check.correct_before, check.correct_after
(0, 1, 1, 0)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.envs.types import Observation, observe
from aerorl_ops.eval_runner.held_out import greedy_replies
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rows.task_item import TaskItem
from aerorl_ops.text.exact_match import answers_match, normalize_answer, predicted_answer

Policy = Callable[[Sequence[Observation]], list[str]]
"""Reply texts to observations, in order."""


def graded_answer(reply: str) -> str:
    """A reply's answer as the exact-match grader reads it, normalised."""
    return normalize_answer(predicted_answer(reply))


@dataclass(frozen=True)
class OneImageSwap:
    """Counts of the check on ``questions`` items; the shares are 0.0 where their count is 0."""

    questions: int
    answers_changed: int
    labels_changed: int  # items whose true answer the new image changes
    changed_where_label_changed: int
    correct_before: int
    correct_after: int

    @property
    def changed(self) -> float:
        """Share of answers that changed with the image."""
        return self.answers_changed / self.questions if self.questions else 0.0

    @property
    def changed_when_label_changed(self) -> float:
        """Share of answers that changed where the true answer did (1.0 for a policy that reads the image)."""
        return self.changed_where_label_changed / self.labels_changed if self.labels_changed else 0.0

    @property
    def changed_when_label_kept(self) -> float:
        """Share of answers that changed where the true answer did not."""
        kept = self.questions - self.labels_changed
        return (self.answers_changed - self.changed_where_label_changed) / kept if kept else 0.0


def one_image_swap_check(policy: Policy, cases: Sequence[tuple[TaskItem, TaskItem]],
                         reading: Callable[[str], object] = graded_answer) -> OneImageSwap:
    """``policy``'s answers to each ``(item, item with one image replaced)`` case, compared (module docstring)."""
    before = policy([observe(item) for item, _ in cases])
    after = policy([observe(swapped) for _, swapped in cases])
    changed = labels = changed_with_label = right_before = right_after = 0
    for (item, swapped), old, new in zip(cases, before, after, strict=True):
        answer_changed = reading(old) != reading(new)
        label_changed = not answers_match(item.answers[0], swapped.answers)
        changed += answer_changed
        labels += label_changed
        changed_with_label += answer_changed and label_changed
        right_before += answers_match(predicted_answer(old), item.answers)
        right_after += answers_match(predicted_answer(new), swapped.answers)
    return OneImageSwap(len(cases), changed, labels, changed_with_label, right_before, right_after)


def policy_replies(loaded: LoadedVLM, env: TaskEnv, max_new_tokens: int) -> Policy:
    """A loaded model's greedy replies (``held_out.greedy_replies``) as a :data:`Policy`."""

    def replies(observations: Sequence[Observation]) -> list[str]:
        return greedy_replies(loaded, env, range(len(observations)), max_new_tokens, observations).texts

    return replies
