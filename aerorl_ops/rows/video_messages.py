"""Where a row's video goes in its messages, and the video shown as still images instead.

A row's question marks its video with the literal ``<video>`` (as ``<image>`` marks an image); the
marker becomes one ``{"type": "video"}`` part, and text with no marker gets its video first, before its
images (a row has at most one video). A model whose processor has a video processor is shown that part
as a video; any other is shown the frames as images: :func:`frames_as_images` puts one
``{"type": "image"}`` part per frame where the video part was, and the frames among the images at the
same position, so images stay in placeholder order. It takes anything that shows a video the way a
:class:`~aerorl_ops.rows.task_item.TaskItem` does (``images``, ``messages``, ``video``, ``video_fps``): an
item (encoded frames, the benchmark) or an environment's observation (decoded frames, training and
evaluation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol, TypeVar

from aerorl_ops.rows.image_markers import MarkerMismatch
from aerorl_ops.rows.task_item import Message

VIDEO_MARKER = "<video>"


class ShowsVideo(Protocol):
    """A dataclass showing images and at most one video in its messages (``TaskItem``, ``envs.types.Observation``)."""

    images: tuple[Any, ...]
    messages: Sequence[Message]
    video: tuple[Any, ...]
    video_fps: float | None


Shown = TypeVar("Shown", bound=ShowsVideo)


def is_video_part(part: object) -> bool:
    return isinstance(part, dict) and part.get("type") == "video"


def is_image_part(part: object) -> bool:
    return isinstance(part, dict) and part.get("type") == "image"


def strip_video_marker(text: str) -> str:
    """The text without its video marker, whitespace collapsed.

    >>> strip_video_marker("In <video> what moves?")
    'In what moves?'
    """
    return " ".join(text.replace(VIDEO_MARKER, " ").split())


def with_video(parts: Sequence[dict]) -> list[dict]:
    """One message's content ``parts`` (text and images, ``content_parts``') with the video placed at the
    text's ``<video>`` marker, or first when there is none; more than one marker is a :class:`MarkerMismatch`.

    >>> with_video([{"type": "image"}, {"type": "text", "text": "Watch <video> then say"}])
    [{'type': 'image'}, {'type': 'text', 'text': 'Watch '}, {'type': 'video'}, {'type': 'text', 'text': ' then say'}]
    >>> with_video([{"type": "text", "text": "What moves?"}])
    [{'type': 'video'}, {'type': 'text', 'text': 'What moves?'}]
    """
    markers = sum(part["text"].count(VIDEO_MARKER) for part in parts if part.get("type") == "text")
    if markers > 1:
        raise MarkerMismatch(f"text has {markers} {VIDEO_MARKER} markers; a row has one video")
    if markers == 0:
        return [{"type": "video"}, *parts]
    placed: list[dict] = []
    for part in parts:
        if part.get("type") == "text" and VIDEO_MARKER in part["text"]:
            before, after = part["text"].split(VIDEO_MARKER)
            placed += [*_text(before), {"type": "video"}, *_text(after)]
        else:
            placed.append(part)
    return placed


def _text(text: str) -> list[dict]:
    return [{"type": "text", "text": text}] if text else []


def frames_as_images(observation: Shown) -> Shown:
    """``observation`` with its video shown as images: each video part replaced by one image part per frame,
    the frames placed among the images where that part was (the observation itself when it has no video).

    >>> from aerorl_ops.rows.task_item import TaskItem
    >>> item = TaskItem("v", "clips", "test", "c.jsonl", "Q", ("a",), (b"img",), ({"role": "user", "content": [
    ...     {"type": "image"}, {"type": "video"}, {"type": "text", "text": "Q"}]},), video=(b"f0", b"f1"),
    ...     video_fps=1.0)
    >>> shown = frames_as_images(item); shown.images, [p["type"] for p in shown.messages[0]["content"]], shown.video
    ((b'img', b'f0', b'f1'), ['image', 'image', 'image', 'text'], ())
    """
    if not observation.video:
        return observation
    images, position, messages = list(observation.images), 0, []
    for message in observation.messages:
        content = message["content"]
        if isinstance(content, str):
            messages.append(message)
            continue
        parts: list[dict] = []
        for part in content:
            if is_video_part(part):
                images[position:position] = observation.video
                parts += [{"type": "image"} for _ in observation.video]
                position += len(observation.video)
            else:
                position += is_image_part(part)
                parts.append(part)
        messages.append({**message, "content": parts})
    return replace(observation, images=tuple(images), messages=messages, video=(), video_fps=None)


def video_parts(messages: Sequence[Message]) -> int:
    """How many video parts ``messages`` show."""
    return sum(is_video_part(part) for message in messages if not isinstance(message["content"], str)
               for part in message["content"])
