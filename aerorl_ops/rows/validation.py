"""Checks that turn one raw dataset record into a :class:`TaskItem` or a :class:`RejectedRow`.

Every loader checks its records here (the hub loaders, the synthetic sets' tests and every task
environment's), so a record is judged the same wherever it is read. A record is rejected, never
silently dropped, when:

* it has no sample id;
* its sample id, dataset name or question type is text UTF-8 cannot store (a lone surrogate, which a
  JSON ``\\ud800`` escape makes);
* its question is missing, blank, not valid UTF-8 (or not storable as it) or longer than
  ``MAX_QUESTION_CHARS``;
* it has no answer aliases (unless ``RowChecks.allow_unanswered``), or an alias is not
  valid UTF-8 (or not storable as it) or longer than ``MAX_ALIAS_CHARS``;
* its (first) image's bytes are missing, fail ``PIL.Image.verify()``, fail a full decode
  (truncated files often pass ``verify()``; a fresh ``load()`` catches them), or hold
  more than ``max_image_pixels`` pixels; then each further image of a multi-image record
  is checked the same way, its rejection naming its position (``image 1: ...``);
* a video's frame fails the same image checks (``video frame 2: ...``). A record with a video
  and no image is checked for its frames alone; one with neither is rejected for its missing
  image unless ``RowChecks.allow_no_image`` (a text-only question).

Normalisation: the question and each alias are stripped of surrounding whitespace;
``None`` and blank aliases are skipped; aliases are deduplicated keeping first order.

Truncated-file detection relies on ``PIL.ImageFile.LOAD_TRUNCATED_IMAGES`` being left
at its default ``False``; this module never changes it.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

from PIL import Image

from aerorl_ops.rows.load_result import RejectedRow, unicode_problem
from aerorl_ops.rows.task_item import Message, TaskItem

MAX_QUESTION_CHARS = 4_096
MAX_ALIAS_CHARS = 1_024
# 36 MP = 6000 x 6000; DocVQA's largest scans are well below it.
MAX_IMAGE_PIXELS = 36_000_000


@dataclass(frozen=True)
class RowChecks:
    """Thresholds and switches for :func:`validate_item`."""

    max_question_chars: int = MAX_QUESTION_CHARS
    max_alias_chars: int = MAX_ALIAS_CHARS
    max_image_pixels: int = MAX_IMAGE_PIXELS
    allow_unanswered: bool = False
    """Keep rows with no answer aliases (e.g. DocVQA test, whose answers are withheld)."""
    allow_no_image: bool = False
    """Keep rows with no image and no video: text-only questions (a ``jsonl`` dataset's ``allow_no_image``)."""


DEFAULT_CHECKS = RowChecks()

TextValue = str | bytes | None


@dataclass(frozen=True)
class ItemCandidate:
    """One record as it came out of a file or generator, before any check. ``locator`` points a person
    at the record.

    Text fields may still be ``bytes`` (decoded here as UTF-8) or ``None``; the other fields become
    the item's as they are.
    """

    item_id: str | None
    dataset: str
    split: str
    source: str
    locator: str
    question: TextValue
    answers: Sequence[TextValue] | None
    images: Sequence[bytes | None]
    messages: Sequence[Message] = ()
    question_type: str | None = None
    evidence_entities: tuple[str, ...] = field(default=())
    video: Sequence[bytes] = ()
    video_fps: float | None = None

    def rejected(self, reason: str) -> RejectedRow:
        """This record rejected for ``reason``."""
        return RejectedRow(source=self.source, locator=self.locator, sample_id=self.item_id or None, reason=reason)


class _Reject(Exception):
    """Internal: carries the rejection reason out of a nested check."""


def validate_item(candidate: ItemCandidate, checks: RowChecks = DEFAULT_CHECKS) -> TaskItem | RejectedRow:
    """Return the checked :class:`TaskItem`, or a :class:`RejectedRow` saying what is wrong.

    >>> from aerorl_ops.rows.validation import ItemCandidate, validate_item
    >>> bad = ItemCandidate("s1", "docvqa", "validation", "f.parquet", "f.parquet#row=0",
    ...                     question="  ", answers=["4"], images=[b""])
    >>> validate_item(bad).reason
    'empty question'
    """
    try:
        if not candidate.item_id:
            raise _Reject("missing sample id")
        _check_unicode(candidate.item_id, "sample id")
        _check_unicode(candidate.dataset, "dataset name")
        if candidate.question_type is not None:
            _check_unicode(candidate.question_type, "question type")
        question = _checked_question(candidate.question, checks)
        answers = _checked_answers(candidate.answers, checks)
        if candidate.images or not (candidate.video or checks.allow_no_image):
            _checked_image(candidate.images[0] if candidate.images else None, checks)
        for position, image in enumerate(candidate.images[1:], start=1):
            problem = "missing image bytes" if not image else image_problem(image, checks.max_image_pixels)
            if problem:
                raise _Reject(f"image {position}: {problem}")
        for position, frame in enumerate(candidate.video):
            problem = "missing image bytes" if not frame else image_problem(frame, checks.max_image_pixels)
            if problem:
                raise _Reject(f"video frame {position}: {problem}")
    except _Reject as rejection:
        return candidate.rejected(str(rejection))
    return TaskItem(
        item_id=candidate.item_id,
        dataset=candidate.dataset,
        split=candidate.split,
        source=candidate.source,
        question=question,
        answers=answers,
        images=tuple(candidate.images),
        messages=tuple(candidate.messages),
        question_type=candidate.question_type,
        evidence_entities=candidate.evidence_entities,
        video=tuple(candidate.video),
        video_fps=candidate.video_fps,
    )


def _decoded(value: str | bytes, what: str) -> str:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as error:
            raise _Reject(f"{what} is not valid UTF-8 ({error.reason} at byte {error.start})") from None
    if isinstance(value, str):
        _check_unicode(value, what)
        return value
    raise _Reject(f"{what} is a {type(value).__name__}, expected text")


def _check_unicode(text: str, what: str) -> None:
    problem = unicode_problem(text)
    if problem:
        raise _Reject(f"{what} is not valid Unicode ({problem})")


def _checked_question(value: TextValue, checks: RowChecks) -> str:
    if value is None:
        raise _Reject("missing question")
    question = _decoded(value, "question").strip()
    if not question:
        raise _Reject("empty question")
    if len(question) > checks.max_question_chars:
        raise _Reject(f"question too long: {len(question)} chars > {checks.max_question_chars}")
    return question


def _checked_answers(values: Sequence[TextValue] | None, checks: RowChecks) -> tuple[str, ...]:
    aliases: list[str] = []
    for index, value in enumerate(values or ()):
        if value is None:
            continue
        alias = _decoded(value, f"answer alias {index}").strip()
        if len(alias) > checks.max_alias_chars:
            raise _Reject(f"answer alias {index} too long: {len(alias)} chars > {checks.max_alias_chars}")
        if alias and alias not in aliases:
            aliases.append(alias)
    if not aliases and not checks.allow_unanswered:
        raise _Reject("no answers")
    return tuple(aliases)


def _checked_image(image_bytes: bytes | None, checks: RowChecks) -> bytes:
    if not image_bytes:
        raise _Reject("missing image bytes")
    problem = image_problem(image_bytes, checks.max_image_pixels)
    if problem:
        raise _Reject(problem)
    return image_bytes


def image_problem(image_bytes: bytes, max_pixels: int = MAX_IMAGE_PIXELS) -> str | None:
    """Why these encoded bytes are not a usable image, or ``None`` when they are.

    Size is read from the header first, so an oversized image is never decoded. PIL's warnings about the bytes
    (a large image, a TIFF's "Truncated File Read") are not shown: the verdict is what this function says.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with Image.open(io.BytesIO(image_bytes)) as image:
                width, height = image.size
                if width * height > max_pixels:
                    return f"image too large: {width}x{height} = {width * height} pixels > limit {max_pixels}"
                image.verify()
        except Image.DecompressionBombError as error:
            return f"image too large: {error}"
        except Image.UnidentifiedImageError:
            return f"corrupt image: {len(image_bytes)} bytes in no format PIL recognises"
        except Exception as error:  # PIL raises many types for bad bytes
            return f"corrupt image: {type(error).__name__}: {error}"
        try:
            with Image.open(io.BytesIO(image_bytes)) as image:
                image.load()
        except Exception as error:
            return f"truncated or undecodable image: {type(error).__name__}: {error}"
    return None
