"""Shared PIL helpers for the synthetic generators: fonts, a canvas that remembers what it wrote,
and deterministic PNG encoding.

Text uses Pillow's bundled scalable font (``ImageFont.load_default(size=...)``, Pillow >= 10.1
with FreeType). Sizes are the font's em size in pixels; ``MIN_TEXT_SIZE`` is the smallest
the generators use so every glyph stays legible after a VLM's resize.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from functools import cache

from PIL import Image, ImageDraw, ImageFont

MIN_TEXT_SIZE = 16
WHITE = (255, 255, 255)
INK = (20, 20, 20)


@cache
def font(size: int) -> ImageFont.FreeTypeFont:
    """Pillow's bundled scalable font at ``size`` px; fails loudly if FreeType is missing."""
    if size < MIN_TEXT_SIZE:
        raise ValueError(f"font size {size} is below MIN_TEXT_SIZE={MIN_TEXT_SIZE}")
    loaded = ImageFont.load_default(size=size)
    if not isinstance(loaded, ImageFont.FreeTypeFont):
        raise RuntimeError(
            "Pillow's default font is not scalable here (Pillow < 10.1 or built without FreeType); "
            "install a Pillow wheel with FreeType to render synthetic rows"
        )
    return loaded


def text_width(text: str, size: int) -> float:
    """Advance width of ``text`` in pixels at ``size``."""
    return font(size).getlength(text)


@dataclass(frozen=True)
class RenderedImage:
    """Encoded PNG and every string drawn on it, in drawing order."""

    png: bytes
    drawn_text: tuple[str, ...]


class Canvas:
    """A white RGB image that records each string drawn on it."""

    def __init__(self, width: int, height: int) -> None:
        self.width = width
        self.height = height
        self.image = Image.new("RGB", (width, height), WHITE)
        self.draw = ImageDraw.Draw(self.image)
        self._drawn: list[str] = []

    def text(
        self,
        xy: tuple[float, float],
        text: str,
        size: int,
        fill: tuple[int, int, int] = INK,
        anchor: str = "la",
    ) -> None:
        """Draw ``text`` at ``xy`` (PIL anchor, default left-ascender) and remember it."""
        self.draw.text(xy, text, font=font(size), fill=fill, anchor=anchor)
        self._drawn.append(text)

    def finish(self) -> RenderedImage:
        return RenderedImage(png=encode_png(self.image), drawn_text=tuple(self._drawn))


def encode_png(image: Image.Image) -> bytes:
    """PNG bytes that depend only on the pixels: fixed compression, no metadata chunks."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=False, compress_level=6)
    return buffer.getvalue()
