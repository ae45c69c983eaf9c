"""Collect checked task items (or rejections, with a reason), and sample which records to read.

Records are checked by the dataset rows' own checks (``aerorl_ops.rows.validation.validate_item``): a
missing or blank question, no answer, missing image bytes, an image PIL cannot decode or one too large,
so a record is judged the same whether it becomes a benchmark row or an environment item; every extra
image of a multi-image record is checked the same way. Item ids must be unique: a repeat is rejected,
naming where the id was first seen.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable
from pathlib import Path

from aerorl_ops.rows.load_result import LoadResult, RejectedRow
from aerorl_ops.rows.task_item import TaskItem


class ImageFileProblem(Exception):
    """An image file named by a record cannot be read; the message is the rejection reason."""


def read_image_file(path: Path) -> bytes:
    """The bytes of an image file a record names, or :class:`ImageFileProblem` saying why not."""
    if not os.path.isfile(path):  # False, not an error, for a name too long
        raise ImageFileProblem(f"image file not found: {path}")
    try:
        return path.read_bytes()
    except OSError as error:
        raise ImageFileProblem(f"image file unreadable: {path} ({error.strerror or error})") from None


def collect(outcomes: Iterable[TaskItem | RejectedRow], locators: Iterable[str]) -> LoadResult:
    """Items and rejections in record order; a repeated item id is rejected as a duplicate.

    ``locators`` gives each outcome's locator, to name where a duplicated id was first seen.
    """
    data = LoadResult()
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
