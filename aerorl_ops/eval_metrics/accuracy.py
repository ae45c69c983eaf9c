"""Accuracy with its binomial standard error, overall and per question type.

>>> report = accuracy_report([("yes_no", True), ("yes_no", False), ("colour", True), (None, True)])
>>> report.overall.correct, report.overall.n, report.overall.accuracy
(3, 4, 0.75)
>>> {name: (value.correct, value.n) for name, value in report.by_type.items()}
{'colour': (1, 1), 'yes_no': (1, 2)}
>>> round(report.overall.standard_error, 6)
0.216506
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from aerorl_ops.eval_metrics.binomial import binomial_stderr


@dataclass(frozen=True)
class Accuracy:
    """``correct`` of ``n`` answers right; accuracy and standard error are 0.0 when ``n`` is 0."""

    correct: int
    n: int

    @property
    def accuracy(self) -> float:
        return self.correct / self.n if self.n else 0.0

    @property
    def standard_error(self) -> float:
        """The binomial standard error ``sqrt(p (1 - p) / n)``; 0.0 when ``n`` is 0."""
        return binomial_stderr(self.accuracy, self.n) if self.n else 0.0


@dataclass(frozen=True)
class AccuracyReport:
    """Accuracy over everything, and per question type (items with no type count only overall)."""

    overall: Accuracy
    by_type: Mapping[str, Accuracy]


def accuracy_by(groups: Sequence[str], outcomes: Iterable[tuple[str, bool]]) -> dict[str, Accuracy]:
    """Tally ``(group, correct)`` pairs into each of ``groups``, in that order (n = 0 for a group without an
    outcome); an outcome of another group is a ``ValueError`` naming it.

    >>> {name: (value.correct, value.n) for name, value in accuracy_by(
    ...     ["easy_vqa", "shapes", "text"], [("shapes", True), ("easy_vqa", False), ("shapes", False)]).items()}
    {'easy_vqa': (0, 1), 'shapes': (1, 2), 'text': (0, 0)}
    """
    tallies = {group: [0, 0] for group in groups}
    for group, is_correct in outcomes:
        if group not in tallies:
            raise ValueError(f"outcome of group {group!r}, which is none of {list(groups)}")
        tallies[group][0] += bool(is_correct)
        tallies[group][1] += 1
    return {group: Accuracy(*tally) for group, tally in tallies.items()}


def accuracy_report(outcomes: Iterable[tuple[str | None, bool]]) -> AccuracyReport:
    """Tally ``(question_type, correct)`` pairs; types are listed in sorted order."""
    correct = total = 0
    by_type: dict[str, list[int]] = {}
    for question_type, is_correct in outcomes:
        total += 1
        correct += bool(is_correct)
        if question_type is not None:
            tally = by_type.setdefault(question_type, [0, 0])
            tally[0] += bool(is_correct)
            tally[1] += 1
    return AccuracyReport(
        overall=Accuracy(correct, total),
        by_type={name: Accuracy(*by_type[name]) for name in sorted(by_type)},
    )
