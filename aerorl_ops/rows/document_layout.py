"""Blocks a synthetic document is made of, and the renderer that stacks them top to bottom.

A document is a tuple of blocks. Each block knows its height and draws itself through a
:class:`~aerorl_ops.rows.drawing.Canvas`, so the renderer can report exactly which strings
ended up on the image. Text that would not fit raises instead of being clipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aerorl_ops.rows.document_values import FieldValue
from aerorl_ops.rows.drawing import Canvas, RenderedImage, text_width

DOCUMENT_SIZE = (448, 448)
MARGIN = 24
TITLE_SIZE = 28
FIELD_SIZE = 22
BODY_SIZE = 20
LABEL_GAP = 8
RULE_COLOUR = (120, 120, 120)
UNDERLINE_COLOUR = (150, 150, 150)


@dataclass(frozen=True)
class Title:
    text: str
    size: int = TITLE_SIZE
    height = 42

    def draw(self, canvas: Canvas, y: int) -> None:
        _fits(canvas, self.text, self.size, MARGIN)
        canvas.text((MARGIN, y), self.text, self.size)


@dataclass(frozen=True)
class TextLine:
    text: str
    size: int = BODY_SIZE
    height = 26

    def draw(self, canvas: Canvas, y: int) -> None:
        _fits(canvas, self.text, self.size, MARGIN)
        canvas.text((MARGIN, y), self.text, self.size)


@dataclass(frozen=True)
class Field:
    """``label`` then ``value.shown`` on one line; ``question`` asks for the value (None: never asked)."""

    label: str
    value: FieldValue
    question: str | None = None
    underline: bool = False
    size: int = FIELD_SIZE
    height = 32

    def draw(self, canvas: Canvas, y: int) -> None:
        value_x = MARGIN + text_width(self.label, self.size) + LABEL_GAP
        _fits(canvas, self.value.shown, self.size, value_x)
        canvas.text((MARGIN, y), self.label, self.size)
        canvas.text((value_x, y), self.value.shown, self.size)
        if self.underline:
            line_y = y + self.size + 7  # below descenders, above the next line
            canvas.draw.line((value_x, line_y, canvas.width - MARGIN, line_y), fill=UNDERLINE_COLOUR, width=1)


@dataclass(frozen=True)
class ItemLine:
    """An invoice line: description on the left, amount right-aligned."""

    description: str
    amount: str
    size: int = BODY_SIZE
    height = 26

    def draw(self, canvas: Canvas, y: int) -> None:
        _fits(canvas, f"{self.description}    {self.amount}", self.size, MARGIN)
        canvas.text((MARGIN, y), self.description, self.size)
        canvas.text((canvas.width - MARGIN, y), self.amount, self.size, anchor="ra")


@dataclass(frozen=True)
class Rule:
    height = 14

    def draw(self, canvas: Canvas, y: int) -> None:
        line_y = y + self.height // 2 - 2
        canvas.draw.line((MARGIN, line_y, canvas.width - MARGIN, line_y), fill=RULE_COLOUR, width=2)


Block = Title | TextLine | Field | ItemLine | Rule


def _fits(canvas: Canvas, text: str, size: int, x: float) -> None:
    if x + text_width(text, size) > canvas.width - MARGIN:
        raise ValueError(f"text {text!r} at size {size} does not fit a {canvas.width}px wide document")


def render_blocks(blocks: Sequence[Block], top: int = 16) -> RenderedImage:
    """Draw ``blocks`` top to bottom on a white document page."""
    canvas = Canvas(*DOCUMENT_SIZE)
    y = top
    for block in blocks:
        if y + block.height > canvas.height:
            raise ValueError(f"document blocks overflow the {canvas.height}px page at {block!r}")
        block.draw(canvas, y)
        y += block.height
    return canvas.finish()
