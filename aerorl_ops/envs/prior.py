"""The no-image prior: answer each question with its most common training answer, never looking.

On easy-VQA a model that ignores the image can reach this accuracy from the question text
alone (yes/no questions especially), so it is the bar a model that *sees* must beat.

Questions are keyed by their lower-cased, whitespace-collapsed text. Ties between answers
go to the one seen first in the training data; a question never seen in training gets the
most common training answer overall. A prediction is graded as the environments grade a
reply (:func:`aerorl_ops.text.exact_match.answers_match`).

>>> prior = QuestionPrior.fit([("Is it red?", "no"), ("is it  red?", "yes"), ("Is it red?", "yes"),
...                            ("What shape?", "circle")])
>>> prior.predict("IS IT RED?"), prior.predict("What shape?"), prior.predict("Unseen?")
('yes', 'circle', 'yes')
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from aerorl_ops.eval_metrics.accuracy import AccuracyReport, accuracy_report
from aerorl_ops.rows.task_item import TaskItem
from aerorl_ops.text.exact_match import answers_match


def question_key(question: str) -> str:
    """How the prior tells questions apart: lower-cased, whitespace collapsed."""
    return " ".join(question.lower().split())


@dataclass(frozen=True)
class QuestionPrior:
    """The most common training answer per question, and overall (for unseen questions)."""

    answers: Mapping[str, str]
    fallback: str

    @classmethod
    def fit(cls, pairs: Iterable[tuple[str, str]]) -> QuestionPrior:
        """Fit on ``(question, answer)`` training pairs."""
        per_question: dict[str, Counter[str]] = {}
        overall: Counter[str] = Counter()
        for question, answer in pairs:
            per_question.setdefault(question_key(question), Counter())[answer] += 1
            overall[answer] += 1
        if not overall:
            raise ValueError("the no-image prior needs at least one training (question, answer) pair")
        answers = {key: counts.most_common(1)[0][0] for key, counts in per_question.items()}
        return cls(answers=answers, fallback=overall.most_common(1)[0][0])

    def predict(self, question: str) -> str:
        return self.answers.get(question_key(question), self.fallback)

    def is_correct(self, question: str, answers: Sequence[str]) -> bool:
        return answers_match(self.predict(question), answers)

    def accuracy(self, items: Iterable[TaskItem]) -> AccuracyReport:
        """The prior's accuracy on ``items``, overall and per question type."""
        return self.accuracy_on((item.question, item.answers, item.question_type) for item in items)

    def accuracy_on(self, questions: Iterable[tuple[str, Sequence[str], str | None]]) -> AccuracyReport:
        """The prior's accuracy on ``(question, answers, question_type)`` triples (no images needed)."""
        return accuracy_report((kind, self.is_correct(question, answers)) for question, answers, kind in questions)
