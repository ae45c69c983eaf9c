"""A generated row together with the strings drawn on its image."""

from __future__ import annotations

from dataclasses import dataclass

from aerorl_ops.rows.row import Row


@dataclass(frozen=True)
class SyntheticSample:
    """``drawn_text`` lets tests check that an answer is actually visible in ``row.image_bytes``."""

    row: Row
    drawn_text: tuple[str, ...]
