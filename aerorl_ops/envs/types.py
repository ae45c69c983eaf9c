"""The values that travel between a task environment and whoever drives it (a trainer, an evaluator).

An environment holds :class:`~aerorl_ops.rows.task_item.TaskItem` s (``aerorl_ops.rows.task_item``:
the one record of a question, with the chat messages that show it). ``reset`` turns an item into an
:class:`EpisodeState` (the item itself and the turn) and an :class:`Observation` (decoded images plus
fresh messages); ``step`` turns a :class:`Completion` into a :class:`StepResult` whose
:class:`StepInfo` says whether the answer is right, apart from the shaped reward.
"""

from __future__ import annotations

import copy
import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from PIL import Image

from aerorl_ops.rows.task_item import Message, TaskItem


@dataclass(frozen=True)
class Observation:
    """What the model sees at the start of a turn: RGB images and the chat messages showing them; a
    row's ``video`` (its frames, RGB, in time order) with ``video_fps``, the frames kept per second
    of the clip (none without a video)."""

    images: tuple[Image.Image, ...]
    messages: list[Message]
    video: tuple[Image.Image, ...] = ()
    video_fps: float | None = None


def observe(item: TaskItem) -> Observation:
    """Decode the item's images and video frames (as RGB) and copy its messages, so a caller may edit them
    freely."""
    return Observation(images=_decoded(item.images), messages=copy.deepcopy(list(item.messages)),
                       video=_decoded(item.video), video_fps=item.video_fps)


def _decoded(encoded: tuple[bytes, ...]) -> tuple[Image.Image, ...]:
    images = []
    for data in encoded:
        with Image.open(io.BytesIO(data)) as image:
            images.append(image.convert("RGB"))
    return tuple(images)


@dataclass(frozen=True)
class EpisodeState:
    """Where an episode stands: the item it is about and how many turns were taken."""

    item: TaskItem
    turn: int = 0


@dataclass(frozen=True)
class Completion:
    """The model's reply: decoded text and the generated token ids (EOS and padding removed)."""

    text: str
    token_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class StepInfo:
    """Why the reward is what it is.

    ``components`` maps each reward component's name to its score; ``correct`` is the task's
    standard accuracy test, so accuracy is known even when the reward is shaped;
    ``prediction`` is the answer text that was graded.
    """

    components: Mapping[str, float]
    correct: bool
    prediction: str


class StepResult(NamedTuple):
    """``done`` ends the episode; a multi-turn environment returns the next ``observation`` and ``state``."""

    reward: float
    done: bool
    info: StepInfo
    observation: Observation | None = None
    state: EpisodeState | None = None


class EnvCounts(NamedTuple):
    """Records an environment read, and how many became items or were rejected."""

    read: int
    accepted: int
    rejected: int
