"""Chat messages with image placeholders, built from plain text that may hold ``<image>`` markers.

MAYE's JSONL questions and verl's Parquet prompts mark where an image goes with the literal
``<image>``; verl replaces the k-th marker by the k-th image. Here each marker becomes a
``{"type": "image"}`` part; text with no marker gets its images in front (MAYE's layout and
the benchmark prompt's). A count of markers other than the number of images is an error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from aerorl_ops.rows.task_item import Message

IMAGE_MARKER = "<image>"
_MARKER_SPLIT = re.compile(f"({re.escape(IMAGE_MARKER)})")


class MarkerMismatch(ValueError):
    """The text's image markers do not match the images given."""


def strip_markers(text: str) -> str:
    """The text without image markers, whitespace collapsed: what a question reads as without its images.

    >>> strip_markers("<image>In the figure, what is x?"), strip_markers("Compare <image> with <image>.")
    ('In the figure, what is x?', 'Compare with .')
    """
    return " ".join(text.replace(IMAGE_MARKER, " ").split())


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


def user_message(text: str, image_count: int) -> Message:
    """One user turn showing ``image_count`` images and ``text``."""
    return {"role": "user", "content": content_parts(text, image_count)}


def with_instruction(question: str, instruction: str) -> str:
    """The question, then the instruction on its own line when there is one.

    >>> with_instruction("What shape?", "Answer with one word."), with_instruction("Q?", "")
    ('What shape?\\nAnswer with one word.', 'Q?')
    """
    return f"{question}\n{instruction}" if instruction else question


def messages_with_images(messages: Sequence[dict], image_count: int) -> list[Message]:
    """verl's prompt messages (string contents with markers) as messages with image parts.

    Every marker across all messages takes the next image, in order; the total must equal
    ``image_count``. A message whose content is not a string is refused.

    >>> messages_with_images([{"role": "system", "content": "Be brief."},
    ...                       {"role": "user", "content": "<image>x?"}], 1)[1]["content"]
    [{'type': 'image'}, {'type': 'text', 'text': 'x?'}]
    """
    total = 0
    converted: list[Message] = []
    for position, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise MarkerMismatch(f"prompt message {position} is not a {{role, content}} object")
        content = message.get("content")
        if not isinstance(content, str):
            raise MarkerMismatch(f"prompt message {position} has content of type {type(content).__name__}, "
                                 "expected a string with <image> markers")
        markers = content.count(IMAGE_MARKER)
        total += markers
        converted.append({"role": message["role"], "content": content_parts(content, markers, markers_required=True)})
    if total != image_count:
        raise MarkerMismatch(f"prompt has {total} {IMAGE_MARKER} markers for {image_count} images")
    return converted
