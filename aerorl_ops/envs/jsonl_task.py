"""``jsonl``: a user's dataset in MAYE's JSONL format, one question per line.

MAYE (GAIR-NLP/MAYE, README "Each sample follows the format") stores::

    {"question": "<image>In the figure, ... What is $B C ?$", "answer": "20",
     "solution": "\\\\boxed{20}", "id": "geometry3k_2948", "image": "geometry3k_images/geometry3k_2948.png"}

* ``image``: a path relative to the JSONL file's folder (absolute paths work too); a list
  of paths is accepted for several images. A path must resolve inside that folder or one of
  ``image_roots`` (``aerorl_ops.envs.image_paths``).
* ``question``: ``<image>`` markers place the images (as in verl); with no marker the
  images come first, as MAYE's chat prompt puts them. The question type's key is the
  question without markers.
* ``answer``: a string (a number or a list of aliases is accepted). When it is missing or
  blank, the answer is the last ``\\boxed{...}`` of ``solution``.
* ``id``: the item id; ``line-<n>`` when absent.
* with the dataset's ``allow_no_image = true``, a line without ``image`` (absent or null) and
  without ``video`` is a text-only question (no image shown); otherwise it is rejected.
* ``video`` (optional): a video file, or a list of its frame files (taken at the row's ``video_fps``
  when it gives one), sampled at the dataset's ``fps`` and at most ``max_frames`` frames
  (``rows.video_frames``); a ``<video>`` marker in the question places it, else it comes first. A row
  with a video may have no ``image``. The model is shown it as a video or as images
  (``models.video_input``).

Blank lines are skipped. With ``limit``, that many of the non-blank lines are drawn with
``seed``; every line drawn becomes an item or a rejection (not valid UTF-8 or JSON, nested too
deeply or holding a number past Python's digit limit, not an object, no question, no answer, text
with a lone surrogate (a ``\\ud800`` escape), a missing or unreadable image, markers that do not match
the images, an image path leaving the dataset's folders or that no file can have, a missing frame file
or an undecodable video, a repeated id). Rejections are
located as ``<file>#line=<n>`` (1-based). The reward is exact match after normalisation,
reading a boxed answer first. A file with no usable line is a ``NoUsableRowsError`` naming it
and its top rejection reasons.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from aerorl_ops.envs.base import SingleTurnEnv
from aerorl_ops.envs.exact_match_grader import ExactMatchGrader
from aerorl_ops.envs.image_paths import ImageFolder
from aerorl_ops.envs.items import ImageFileProblem, collect, sample_indices
from aerorl_ops.envs.messages import MarkerMismatch, content_parts, strip_markers, with_instruction
from aerorl_ops.envs.rejections import require_items
from aerorl_ops.envs.video_rows import VIDEO_FIELD, row_video
from aerorl_ops.error_line import error_line
from aerorl_ops.rows.load_result import LoadResult, RejectedRow
from aerorl_ops.rows.task_item import TaskItem
from aerorl_ops.rows.validation import DEFAULT_CHECKS, ItemCandidate, RowChecks, validate_item
from aerorl_ops.rows.video_frames import DEFAULT_FPS, DEFAULT_MAX_FRAMES, VideoProblem, VideoSampling
from aerorl_ops.rows.video_messages import strip_video_marker, with_video
from aerorl_ops.text.exact_match import last_boxed

TEXT_ONLY_CHECKS = RowChecks(allow_no_image=True)
"""The row checks of a dataset with ``allow_no_image``: a line without an image is a text-only question."""


def read_lines(path: Path) -> list[tuple[int, bytes]]:
    """Non-blank lines with their 1-based numbers; a missing file is an error naming it."""
    if not path.is_file():
        raise FileNotFoundError(f"jsonl: dataset file {path} does not exist; pass path=<the .jsonl file>")
    return [(number, line) for number, line in enumerate(path.read_bytes().splitlines(), start=1) if line.strip()]


class BadLine(Exception):
    """A line that is no JSON object; the message is the rejection reason."""


def parse_line(raw: bytes) -> dict[str, Any]:
    """One line as a JSON object, or :class:`BadLine` saying why not."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadLine(f"line is not valid UTF-8 ({error.reason} at byte {error.start})") from None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as error:
        raise BadLine(f"not valid JSON: {error.msg} (column {error.colno})") from None
    except ValueError as error:  # a number past int()'s digit limit
        raise BadLine(f"not readable JSON: {error_line(error)}") from None
    except RecursionError:
        raise BadLine("not readable JSON: arrays or objects nested too deeply") from None
    if not isinstance(record, dict):
        raise BadLine(f"not a JSON object (found {type(record).__name__})")
    return record


def answer_aliases(record: dict[str, Any]) -> list[Any]:
    """The ``answer`` (one or a list), else the last ``\\boxed{}`` of ``solution``, else none.

    >>> answer_aliases({"answer": 20}), answer_aliases({"answer": " ", "solution": "so \\\\boxed{x+1}"})
    (['20'], ['x+1'])
    """
    answer = record.get("answer")
    aliases = answer if isinstance(answer, list) else [answer]
    aliases = [alias if isinstance(alias, str) or alias is None else str(alias) for alias in aliases]
    if any(isinstance(alias, str) and alias.strip() for alias in aliases):
        return aliases
    solution = record.get("solution")
    boxed = last_boxed(solution) if isinstance(solution, str) else None
    return [boxed] if boxed else []


def _item(record: dict[str, Any], base: ItemCandidate, folder: ImageFolder, instruction: str,
          type_field: str | None, sampling: VideoSampling, allow_no_image: bool = False) -> TaskItem | RejectedRow:
    has_video = record.get(VIDEO_FIELD) is not None
    paths = record.get("image")
    paths = [] if paths is None and (has_video or allow_no_image) else paths if isinstance(paths, list) else [paths]
    if (not paths and not has_video and not allow_no_image) or not all(isinstance(name, str) and name.strip()
                                                                       for name in paths):
        return base.rejected("missing image path (field 'image' must name an image file, or a list of them)")
    question = record.get("question")
    if not isinstance(question, str):
        return validate_item(replace(base, question=question))  # rejected for its question, in the check's words
    try:
        images = [folder.read(name) for name in paths]
        video = row_video(record, folder, sampling) if has_video else None
        parts = content_parts(with_instruction(question, instruction), len(paths))
        messages = [{"role": "user", "content": with_video(parts) if video else parts}]
    except (ImageFileProblem, MarkerMismatch, VideoProblem) as problem:
        return base.rejected(str(problem))
    kind = record.get(type_field) if type_field else None
    if video:
        base = replace(base, video=video.frames, video_fps=video.sampled_fps)
        question = strip_video_marker(question)
    return validate_item(replace(base, question=strip_markers(question), answers=answer_aliases(record),
                                images=images, messages=messages, question_type=None if kind is None else str(kind)),
                         TEXT_ONLY_CHECKS if allow_no_image else DEFAULT_CHECKS)


def load_jsonl(path: str | Path, split: str = "train", limit: int | None = None, seed: int = 0,
               name: str | None = None, instruction: str = "", type_field: str | None = None,
               image_roots: Sequence[str] = (), fps: float = DEFAULT_FPS,
               max_frames: int = DEFAULT_MAX_FRAMES, allow_no_image: bool = False) -> LoadResult:
    """Items of one MAYE-format JSONL file (see the module docstring)."""
    sampling = VideoSampling(fps, max_frames)
    path = Path(path)
    folder = ImageFolder.of(path.parent, image_roots)
    dataset = name or path.stem
    lines = read_lines(path)
    outcomes: list[TaskItem | RejectedRow] = []
    locators: list[str] = []
    for index in sample_indices(len(lines), limit, seed):
        number, raw = lines[index]
        locator = f"{path}#line={number}"
        base = ItemCandidate(item_id=f"line-{number}", dataset=dataset, split=split, source=str(path),
                             locator=locator, question=None, answers=None, images=[], messages=[])
        try:
            record = parse_line(raw)
        except BadLine as problem:
            outcomes.append(base.rejected(str(problem)))
        else:
            if record.get("id") is not None and str(record["id"]).strip():
                base = replace(base, item_id=str(record["id"]).strip())
            outcomes.append(_item(record, base, folder, instruction, type_field, sampling, allow_no_image))
        locators.append(locator)
    return collect(outcomes, locators)


def jsonl_env(path: str, split: str = "train", limit: int | None = None, seed: int = 0, name: str | None = None,
              instruction: str = "", type_field: str | None = None, image_roots: Sequence[str] = (),
              fps: float = DEFAULT_FPS, max_frames: int = DEFAULT_MAX_FRAMES,
              allow_no_image: bool = False) -> SingleTurnEnv:
    """The ``jsonl`` environment; its name is ``name``, else the file's stem. ``image_roots``: folders
    besides the file's own that image paths may lead into; ``fps`` and ``max_frames``: how a row's video
    is sampled (``rows.video_frames``); ``allow_no_image``: a line without an image is a text-only question."""
    env_name = name or Path(path).stem
    data = require_items(load_jsonl(path, split, limit, seed, name, instruction, type_field, image_roots, fps,
                                    max_frames, allow_no_image), env_name, f"file {path}")
    return SingleTurnEnv(env_name, data, ExactMatchGrader())
