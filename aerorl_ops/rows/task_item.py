"""The one record of a question: what every loader produces, an environment shows and grades, a rollout
carries to the loss and to the rollout log, and a rows file stores (``rows.item_table``).

Messages use the Hugging Face / Qwen2-VL chat form: ``{"role": ..., "content": [parts]}`` with
``{"type": "image"}`` placeholders (one per image, in image order) and ``{"type": "text", "text": ...}``
parts, which the processor's chat template renders.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

Message = dict[str, Any]


@dataclass(frozen=True)
class TaskItem:
    """One visual question.

    ``question`` is the question text with image markers removed (what a no-image prior keys on and
    what the rollout log shows); ``answers`` every alias a grader accepts, ``answers[0]`` the
    canonical one; ``images`` the encoded image bytes, in the order of the messages' image
    placeholders; ``source`` the file (or generator) it was read from.

    ``messages`` are what the model is shown: built by the loader from the dataset's own prompt (image
    markers placed, a verl prompt's every turn) and its environment's instruction, since neither can be
    rebuilt from ``question``. A question read without an environment (hub files, synthetic rows) has
    none; the benchmark shows it with its JSON-answer prompt (``generation.prompts``).

    ``question_type`` groups items for per-type accuracy (easy-VQA: ``yes_no``, ``colour``, ``shape``),
    None when the dataset has none. ``evidence_entities`` are the strings visible in the image that
    support the answer (the grounding reward compares claimed entities with them); they default to
    the answers, as datasets without such an annotation have none.

    ``video`` is a row's video as its sampled frames (encoded image bytes, in time order;
    ``rows.video_frames``), shown where the messages' one ``{"type": "video"}`` part is, and
    ``video_fps`` the frames kept per second of the clip; a row without a video has ``()`` and None.
    """

    item_id: str
    dataset: str
    split: str
    source: str
    question: str
    answers: tuple[str, ...]
    images: tuple[bytes, ...]
    messages: tuple[Message, ...] = ()
    question_type: str | None = None
    evidence_entities: tuple[str, ...] = ()
    video: tuple[bytes, ...] = ()
    video_fps: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "answers", tuple(self.answers))
        object.__setattr__(self, "images", tuple(self.images))
        object.__setattr__(self, "video", tuple(self.video))
        object.__setattr__(self, "messages", tuple(self.messages))
        object.__setattr__(self, "evidence_entities", tuple(self.evidence_entities or self.answers))


def prompt_text(item: TaskItem) -> str:
    """The text the item's user turns show, image placeholders left out ("" for an item without messages).

    >>> item = TaskItem("q1", "demo", "test", "q.json", "What shape?", ("circle",), (b"png",),
    ...                 ({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What shape?"}]},))
    >>> prompt_text(item), prompt_text(TaskItem("q2", "demo", "test", "q.json", "Q?", ("a",), ()))
    ('What shape?', '')
    """
    return "".join(part.get("text", "") for message in item.messages if message.get("role") == "user"
                   for part in message["content"] if isinstance(part, dict))


def image_sha256(image_bytes: bytes) -> str:
    """Hex SHA-256 of encoded image bytes, used to key and deduplicate images."""
    return hashlib.sha256(image_bytes).hexdigest()
