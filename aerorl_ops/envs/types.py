"""The values that travel between a task environment and whoever drives it (a trainer, an evaluator).

A *task item* is one question as the environment holds it: text, every acceptable answer,
the encoded images and the chat messages that show them. ``reset`` turns an item into an
:class:`Observation` (decoded images plus fresh messages); ``step`` turns a
:class:`Completion` into a :class:`StepResult` whose :class:`StepInfo` says whether the
answer is right, apart from the shaped reward.

Messages use the Hugging Face / Qwen2-VL chat form: ``{"role": ..., "content": [parts]}``
with ``{"type": "image"}`` placeholders (one per image, in image order) and
``{"type": "text", "text": ...}`` parts, which the processor's chat template renders.
"""

from __future__ import annotations

import copy
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from PIL import Image

from aerorl_ops.rows.load_result import RejectedRow

Message = dict[str, Any]


@dataclass(frozen=True)
class TaskItem:
    """One question of a task.

    ``question`` is the question text with image markers removed (what a no-image prior keys
    on); ``messages`` are what the model is shown; ``images`` are encoded image bytes in the
    order of the messages' image placeholders. ``evidence_entities`` feed the grounding reward
    and default to the answers. ``question_type`` groups items for per-type accuracy.
    """

    item_id: str
    dataset: str
    split: str
    source: str
    question: str
    answers: tuple[str, ...]
    images: tuple[bytes, ...]
    messages: tuple[Message, ...]
    question_type: str | None = None
    evidence_entities: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "answers", tuple(self.answers))
        object.__setattr__(self, "images", tuple(self.images))
        object.__setattr__(self, "messages", tuple(self.messages))
        object.__setattr__(self, "evidence_entities", tuple(self.evidence_entities or self.answers))


@dataclass(frozen=True)
class TaskData:
    """What an environment loader hands back: every record read is an item or a rejection."""

    items: list[TaskItem] = field(default_factory=list)
    rejected: list[RejectedRow] = field(default_factory=list)

    @property
    def records_read(self) -> int:
        return len(self.items) + len(self.rejected)


@dataclass(frozen=True)
class Observation:
    """What the model sees at the start of a turn: RGB images and the chat messages showing them."""

    images: tuple[Image.Image, ...]
    messages: list[Message]


def observe(item: TaskItem) -> Observation:
    """Decode the item's images (as RGB) and copy its messages, so a caller may edit them freely."""
    images = []
    for data in item.images:
        with Image.open(io.BytesIO(data)) as image:
            images.append(image.convert("RGB"))
    return Observation(images=tuple(images), messages=copy.deepcopy(list(item.messages)))


@dataclass(frozen=True)
class EpisodeState:
    """Where an episode stands: which item it is about and how many turns were taken."""

    index: int
    item_id: str
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
