"""Where a question's images go in its text: the literal ``<image>`` marker.

MAYE's JSONL questions and verl's Parquet prompts mark where an image goes with ``<image>``; verl
replaces the k-th marker by the k-th image. :func:`content_parts` turns such text into chat content
parts, each marker a ``{"type": "image"}`` placeholder; text with no marker gets its images in front
(MAYE's layout and the benchmark prompt's). A count of markers other than the number of images is a
:class:`MarkerMismatch`. Loaders (``envs.messages``) and the benchmark prompt (``generation.prompts``)
both place images with it.
"""

from __future__ import annotations

import re

IMAGE_MARKER = "<image>"
_MARKER_SPLIT = re.compile(f"({re.escape(IMAGE_MARKER)})")


class MarkerMismatch(ValueError):
    """The text's image markers do not match the images given."""


def content_parts(text: str, image_count: int, markers_required: bool = False) -> list[dict]:
    """Text and image parts of one message, images placed at the markers (or first, when none).

    >>> content_parts("Look <image> here", 1)
    [{'type': 'text', 'text': 'Look '}, {'type': 'image'}, {'type': 'text', 'text': ' here'}]
    >>> content_parts("What colour?", 1)
    [{'type': 'image'}, {'type': 'text', 'text': 'What colour?'}]
    """
    markers = text.count(IMAGE_MARKER)
    if markers == 0 and not markers_required:
        return [{"type": "image"} for _ in range(image_count)] + _text_part(text)
    if markers != image_count:
        raise MarkerMismatch(f"text has {markers} {IMAGE_MARKER} markers for {image_count} images")
    parts: list[dict] = []
    for segment in _MARKER_SPLIT.split(text):
        parts.extend([{"type": "image"}] if segment == IMAGE_MARKER else _text_part(segment))
    return parts


def _text_part(text: str) -> list[dict]:
    return [{"type": "text", "text": text}] if text else []
