"""Turn raw records into checked task items, or into rejections with a reason; sample records.

The checks are the dataset rows' own (``aerorl_ops.rows.validation``): a missing or blank
question, no answer, missing image bytes, an image PIL cannot decode or one too large, so a
record is judged the same whether it becomes a benchmark row or an environment item. Every
extra image of a multi-image record is checked the same way. Item ids must be unique: a
repeat is rejected, naming where the id was first seen.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aerorl_ops.envs.types import Message, TaskData, TaskItem
from aerorl_ops.rows.load_result import RejectedRow
from aerorl_ops.rows.validation import RowCandidate, image_problem, validate_row


@dataclass(frozen=True)
class ItemCandidate:
    """One record as read, before any check. ``locator`` points a person at the record."""

    item_id: str | None
    dataset: str
    split: str
    source: str
    locator: str
    question: str | bytes | None
    answers: Sequence[str | bytes | None] | None
    images: Sequence[bytes | None]
    messages: Sequence[Message]
    question_type: str | None = None
    evidence_entities: tuple[str, ...] = field(default=())


class ImageFileProblem(Exception):
    """An image file named by a record cannot be read; the message is the rejection reason."""


def read_image_file(path: Path) -> bytes:
    """The bytes of an image file a record names, or :class:`ImageFileProblem` saying why not."""
    if not path.is_file():
        raise ImageFileProblem(f"image file not found: {path}")
    try:
        return path.read_bytes()
    except OSError as error:
        raise ImageFileProblem(f"image file unreadable: {path} ({error.strerror or error})") from None


def rejection(candidate: ItemCandidate, reason: str) -> RejectedRow:
    return RejectedRow(source=candidate.source, locator=candidate.locator, sample_id=candidate.item_id or None,
                       reason=reason)


def checked_item(candidate: ItemCandidate) -> TaskItem | RejectedRow:
    """The checked item, or the rejection saying what is wrong with the record."""
    first_image = candidate.images[0] if candidate.images else None
    outcome = validate_row(RowCandidate(
        sample_id=candidate.item_id, dataset=candidate.dataset, split=candidate.split, source=candidate.source,
        locator=candidate.locator, question=candidate.question, answers=candidate.answers, image_bytes=first_image,
        evidence_entities=candidate.evidence_entities))
    if isinstance(outcome, RejectedRow):
        return outcome
    for position, image in enumerate(candidate.images[1:], start=1):
        problem = "missing image bytes" if not image else image_problem(image)
        if problem:
            return rejection(candidate, f"image {position}: {problem}")
    return TaskItem(item_id=outcome.sample_id, dataset=outcome.dataset, split=outcome.split, source=outcome.source,
                    question=outcome.question, answers=outcome.answers, images=tuple(candidate.images),
                    messages=tuple(candidate.messages), question_type=candidate.question_type,
                    evidence_entities=outcome.evidence_entities)


def collect(outcomes: Iterable[TaskItem | RejectedRow], locators: Iterable[str]) -> TaskData:
    """Items and rejections in record order; a repeated item id is rejected as a duplicate.

    ``locators`` gives each outcome's locator, to name where a duplicated id was first seen.
    """
    data = TaskData()
    first_seen: dict[str, str] = {}
    for outcome, locator in zip(outcomes, locators, strict=True):
        if isinstance(outcome, RejectedRow):
            data.rejected.append(outcome)
        elif outcome.item_id in first_seen:
            reason = f"duplicate item id (first seen at {first_seen[outcome.item_id]})"
            data.rejected.append(RejectedRow(outcome.source, locator, outcome.item_id, reason))
        else:
            first_seen[outcome.item_id] = locator
            data.items.append(outcome)
    return data


def sample_indices(count: int, limit: int | None, seed: int) -> list[int]:
    """Which of ``count`` records to read: all when ``limit`` is None, else ``limit`` of them drawn
    without replacement by ``random.Random(seed)``, returned in record order.

    >>> sample_indices(5, None, 0), sample_indices(10, 3, 0), sample_indices(2, 5, 0)
    ([0, 1, 2, 3, 4], [0, 6, 9], [0, 1])
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {limit}")
    if limit is None or limit >= count:
        return list(range(count))
    return sorted(random.Random(seed).sample(range(count), limit))
