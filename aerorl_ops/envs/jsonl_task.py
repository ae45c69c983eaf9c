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

Blank lines are skipped. With ``limit``, that many of the non-blank lines are drawn with
``seed``; every line drawn becomes an item or a rejection (not valid UTF-8 or JSON, not an
object, no question, no answer, a missing or unreadable image, markers that do not match
the images, an image path leaving the dataset's folders, a repeated id). Rejections are
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
from aerorl_ops.rows.load_result import LoadResult, RejectedRow
from aerorl_ops.rows.task_item import TaskItem
from aerorl_ops.rows.validation import ItemCandidate, validate_item
from aerorl_ops.text.exact_match import last_boxed


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
          type_field: str | None) -> TaskItem | RejectedRow:
    paths = record.get("image")
    paths = paths if isinstance(paths, list) else [paths]
    if not paths or not all(isinstance(name, str) and name.strip() for name in paths):
        return base.rejected("missing image path (field 'image' must name an image file, or a list of them)")
    question = record.get("question")
    if not isinstance(question, str):
        return validate_item(replace(base, question=question))  # rejected for its question, in the check's words
    try:
        images = [folder.read(name) for name in paths]
        messages = [{"role": "user", "content": content_parts(with_instruction(question, instruction), len(paths))}]
    except (ImageFileProblem, MarkerMismatch) as problem:
        return base.rejected(str(problem))
    kind = record.get(type_field) if type_field else None
    return validate_item(replace(base, question=strip_markers(question), answers=answer_aliases(record),
                                images=images, messages=messages, question_type=None if kind is None else str(kind)))


def load_jsonl(path: str | Path, split: str = "train", limit: int | None = None, seed: int = 0,
               name: str | None = None, instruction: str = "", type_field: str | None = None,
               image_roots: Sequence[str] = ()) -> LoadResult:
    """Items of one MAYE-format JSONL file (see the module docstring)."""
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
            outcomes.append(_item(record, base, folder, instruction, type_field))
        locators.append(locator)
    return collect(outcomes, locators)


def jsonl_env(path: str, split: str = "train", limit: int | None = None, seed: int = 0, name: str | None = None,
              instruction: str = "", type_field: str | None = None, image_roots: Sequence[str] = ()) -> SingleTurnEnv:
    """The ``jsonl`` environment; its name is ``name``, else the file's stem. ``image_roots``: folders
    besides the file's own that image paths may lead into."""
    env_name = name or Path(path).stem
    data = require_items(load_jsonl(path, split, limit, seed, name, instruction, type_field, image_roots), env_name,
                         f"file {path}")
    return SingleTurnEnv(env_name, data, ExactMatchGrader())
