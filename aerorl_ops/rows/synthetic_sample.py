"""A generated item together with the strings drawn on its image."""

from __future__ import annotations

from dataclasses import dataclass

from aerorl_ops.rows.task_item import TaskItem


@dataclass(frozen=True)
class SyntheticSample:
    """``drawn_text`` lets tests check that an answer is actually visible in ``item.images[0]``."""

    item: TaskItem
    drawn_text: tuple[str, ...]
