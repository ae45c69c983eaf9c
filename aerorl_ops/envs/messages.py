"""Chat messages with image placeholders, built from plain text that may hold ``<image>`` markers.

MAYE's JSONL questions and verl's Parquet prompts mark where an image goes with the literal
``<image>``; verl replaces the k-th marker by the k-th image. Here each marker becomes a
``{"type": "image"}`` part; text with no marker gets its images in front (MAYE's layout and
the benchmark prompt's). A count of markers other than the number of images is an error. The
placement itself (``content_parts``) lives in ``rows.image_markers``, which the benchmark prompt shares.
"""

from __future__ import annotations

from collections.abc import Sequence

from aerorl_ops.rows.image_markers import IMAGE_MARKER, MarkerMismatch, content_parts
from aerorl_ops.rows.task_item import Message

__all__ = ["IMAGE_MARKER", "MarkerMismatch", "content_parts", "messages_with_images", "strip_markers",
           "user_message", "with_instruction"]


def strip_markers(text: str) -> str:
    """The text without image markers, whitespace collapsed: what a question reads as without its images.

    >>> strip_markers("<image>In the figure, what is x?"), strip_markers("Compare <image> with <image>.")
    ('In the figure, what is x?', 'Compare with .')
    """
    return " ".join(text.replace(IMAGE_MARKER, " ").split())


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
