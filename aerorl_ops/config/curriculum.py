"""Curriculum stages: which question types each training batch favours, by step.

A curriculum is written as one string setting (``[training] curriculum``), stages separated by
``;``. Each stage is ``UNTIL: TYPES @ SHARE``: until global step ``UNTIL`` (exclusive; warm-up
steps count first), a share ``SHARE`` of every batch (warm-up and RL alike) is drawn from items
whose question type is in the comma-separated ``TYPES``, the rest from the other items. Stages
follow each other in increasing ``UNTIL``; after the last one, batches are the natural mix.
``@ SHARE`` may be left out (1.0: only those types). The empty string is no curriculum.

>>> parse_curriculum("500: colour,shape @ 0.75")
(CurriculumStage(until_step=500, focus_types=('colour', 'shape'), focus_share=0.75),)
>>> [s.until_step for s in parse_curriculum("100: colour; 500: colour,shape @ 0.5")]
[100, 500]
>>> stage_at(parse_curriculum("100: colour; 500: colour,shape @ 0.5"), 100)
1
>>> stage_at(parse_curriculum("100: colour"), 100) is None
True

A stage is a function of the step alone, so a resumed run is in the stage an uninterrupted one
would be; each step row records its stage and the episodes (items) seen so far.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CurriculumStage:
    until_step: int
    focus_types: tuple[str, ...]
    focus_share: float


def parse_curriculum(spec: str) -> tuple[CurriculumStage, ...]:
    """The stages of ``spec`` (grammar in the module docstring); ``ValueError`` says what is wrong."""
    stages: list[CurriculumStage] = []
    for number, part in enumerate((p.strip() for p in spec.split(";")), start=1):
        if not part:
            continue
        until_text, colon, rest = part.partition(":")
        if not colon:
            raise ValueError(f"stage {number} {part!r} must read 'UNTIL_STEP: type,type @ share'")
        try:
            until = int(until_text.strip())
        except ValueError:
            raise ValueError(f"stage {number} {part!r}: {until_text.strip()!r} is not a step number") from None
        types_text, at, share_text = rest.partition("@")
        types = tuple(t.strip() for t in types_text.split(",") if t.strip())
        if not types:
            raise ValueError(f"stage {number} {part!r} names no question types")
        try:
            share = float(share_text) if at else 1.0
        except ValueError:
            raise ValueError(f"stage {number} {part!r}: share {share_text.strip()!r} is not a number") from None
        if not 0 < share <= 1:
            raise ValueError(f"stage {number} {part!r}: share must be in (0, 1], got {share}")
        if until < 1 or (stages and until <= stages[-1].until_step):
            raise ValueError(f"stage {number} {part!r}: steps must be >= 1 and increase from stage to stage")
        stages.append(CurriculumStage(until, types, share))
    return tuple(stages)


def stage_at(stages: Sequence[CurriculumStage], step: int) -> int | None:
    """The index of the stage that 0-based global ``step`` is in, or None (natural mix)."""
    return next((i for i, stage in enumerate(stages) if step < stage.until_step), None)
