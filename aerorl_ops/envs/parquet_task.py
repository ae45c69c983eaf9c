"""``parquet``: a user's dataset in verl's multimodal Parquet format, one question per row.

verl's preprocessing (``examples/data_preprocess/geo3k.py``) writes, per row::

    data_source: str                       e.g. "hiyouga/geometry3k"
    prompt: [{"role": str, "content": str}]  the chat messages; "<image>" marks each image
    images: [image]                        a datasets Image: struct {bytes, path}
    ability: str
    reward_model: {"style": "rule", "ground_truth": str}
    extra_info: {"split", "index", "answer", "question"}

and verl's ``RLHFDataset._build_messages`` replaces the k-th ``<image>`` marker, across the
messages in order, with the k-th image; the marker count must equal the image count. Here
an image may also be a plain path string, or a struct with null ``bytes`` and a ``path``;
a relative path is taken from the Parquet file's folder, and a path must resolve inside that
folder or one of ``image_roots`` (``aerorl_ops.envs.image_paths``). ``ground_truth`` may be a string,
a number or a list of aliases. ``data_source`` becomes the item's dataset (the environment's
name when absent); ``extra_info.index`` its id (the row number when absent).

Required columns: ``prompt``, ``images``, ``reward_model``; a file lacking one is refused,
naming the column. With ``limit``, that many rows are drawn with ``seed``; every row drawn
becomes an item or a rejection (prompt not a message list, images not a list, markers that do not
match the images, a missing or unreadable image, an image path leaving the dataset's folders, no
ground truth, text that is not valid UTF-8, a repeated id), located as ``<file>#row=<n>`` (0-based).
A file Arrow cannot read (not Parquet or Arrow IPC, or damaged past its header) is a ``TableFileError``
naming it. A file with no usable row is a
``NoUsableRowsError`` naming it and its top rejection reasons. The reward is exact match after
normalisation.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from aerorl_ops.envs.base import SingleTurnEnv
from aerorl_ops.envs.exact_match_grader import ExactMatchGrader
from aerorl_ops.envs.image_paths import ImageFolder
from aerorl_ops.envs.items import ImageFileProblem, collect, sample_indices
from aerorl_ops.envs.messages import MarkerMismatch, messages_with_images, strip_markers
from aerorl_ops.envs.rejections import require_items
from aerorl_ops.rows.load_result import LoadResult, RejectedRow
from aerorl_ops.rows.table_files import MissingColumnError, TableFile
from aerorl_ops.rows.task_item import TaskItem
from aerorl_ops.rows.validation import ItemCandidate, validate_item

REQUIRED_COLUMNS = ("prompt", "images", "reward_model")
OPTIONAL_COLUMNS = ("data_source", "extra_info")


def image_bytes(value: Any, folder: ImageFolder) -> bytes:
    """The encoded bytes of one ``images`` entry, or :class:`ImageFileProblem` saying why not."""
    if isinstance(value, dict):
        if value.get("bytes"):
            return value["bytes"]
        value = value.get("path")
    if isinstance(value, str) and value.strip():
        return folder.read(value)
    raise ImageFileProblem("missing image bytes (neither bytes nor a path)")


def ground_truth_aliases(reward_model: Any) -> list[Any]:
    """``reward_model.ground_truth`` as a list of alias strings (empty when absent).

    >>> ground_truth_aliases({"ground_truth": 20}), ground_truth_aliases({"ground_truth": ["a", "b"]})
    (['20'], ['a', 'b'])
    """
    truth = reward_model.get("ground_truth") if isinstance(reward_model, dict) else None
    aliases = truth if isinstance(truth, list) else [truth]
    return [alias if isinstance(alias, str) or alias is None else str(alias) for alias in aliases]


def question_text(prompt: list[dict]) -> str:
    """The user turns' text without image markers: what the question reads as without its images."""
    return " ".join(strip_markers(message["content"]) for message in prompt
                    if message.get("role") == "user" and isinstance(message.get("content"), str)).strip()


def _item(record: dict[str, Any], base: ItemCandidate, folder: ImageFolder,
          type_column: str | None) -> TaskItem | RejectedRow:
    prompt, images = record["prompt"], record["images"] or []
    if not isinstance(prompt, list):
        return base.rejected(f"prompt is a {type(prompt).__name__}, expected a list of chat messages")
    if not isinstance(images, list):
        return base.rejected(f"images is a {type(images).__name__}, expected a list of images")
    try:
        messages = messages_with_images(prompt, len(images))
        encoded = [image_bytes(image, folder) for image in images]
    except (MarkerMismatch, ImageFileProblem) as problem:
        return base.rejected(str(problem))
    kind = record.get(type_column) if type_column else None
    answers = ground_truth_aliases(record["reward_model"])
    return validate_item(replace(base, question=question_text(prompt), answers=answers, images=encoded,
                                messages=messages, question_type=None if kind is None else str(kind)))


def _records(table_file: TableFile, columns: list[str],
             wanted: set[int]) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """``(row, record)`` for the wanted rows only (other rows are never converted to Python); a row whose
    text is not valid UTF-8 comes as ``(row, the reason)``, the rows beside it as records."""
    start = 0
    for batch in table_file.batches(columns):
        rows = [row for row in range(start, start + batch.num_rows) if row in wanted]
        taken = batch.take(pa.array([row - start for row in rows], type=pa.int64()))
        try:
            records = taken.to_pylist()
        except UnicodeDecodeError:  # a Parquet writer may store any bytes in a string column
            records = [_record(taken.slice(index, 1)) for index in range(taken.num_rows)]
        yield from zip(rows, records, strict=True)
        start += batch.num_rows


def _record(row: pa.RecordBatch) -> dict[str, Any] | str:
    """The one row of ``row`` as a record, or the reason it is none."""
    try:
        return row.to_pylist()[0]
    except UnicodeDecodeError as error:
        return f"row holds text that is not valid UTF-8 ({error.reason} at byte {error.start})"


def _row_count(table_file: TableFile) -> int:
    return sum(batch.num_rows for batch in table_file.batches(REQUIRED_COLUMNS[:1]))


def load_parquet(path: str | Path, split: str = "train", limit: int | None = None, seed: int = 0,
                 name: str | None = None, type_column: str | None = None,
                 image_roots: Sequence[str] = ()) -> LoadResult:
    """Items of one verl-format Parquet (or Arrow) file (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"parquet: dataset file {path} does not exist; pass path=<the .parquet file>")
    table_file = TableFile(path)
    present = table_file.schema.names
    typed = [type_column] if type_column else []
    for column in (*REQUIRED_COLUMNS, *typed):
        if column not in present:
            raise MissingColumnError(path, column, present, "Pass a file in verl's multimodal layout "
                                     "(prompt, images, reward_model.ground_truth)")
    columns = list(dict.fromkeys([*REQUIRED_COLUMNS, *(c for c in OPTIONAL_COLUMNS if c in present), *typed]))
    dataset = name or path.stem
    folder = ImageFolder.of(path.parent, image_roots)
    wanted = set(sample_indices(_row_count(table_file), limit, seed))
    outcomes: list[TaskItem | RejectedRow] = []
    locators: list[str] = []
    for row, record in _records(table_file, columns, wanted):
        readable = record if isinstance(record, dict) else {}  # else the reason its text cannot be read
        extra = readable.get("extra_info") if isinstance(readable.get("extra_info"), dict) else {}
        index = row if extra.get("index") is None else extra["index"]
        source = readable.get("data_source")
        locator = f"{path}#row={row}"
        base = ItemCandidate(item_id=f"{dataset}-{index}", dataset=source if isinstance(source, str) and source
                             else dataset, split=split, source=str(path), locator=locator, question=None,
                             answers=None, images=[], messages=[])
        outcomes.append(_item(record, base, folder, type_column) if isinstance(record, dict)
                        else base.rejected(record))
        locators.append(locator)
    return collect(outcomes, locators)


def parquet_env(path: str, split: str = "train", limit: int | None = None, seed: int = 0, name: str | None = None,
                type_column: str | None = None, image_roots: Sequence[str] = ()) -> SingleTurnEnv:
    """The ``parquet`` environment; its name is ``name``, else the file's stem. ``image_roots``: folders
    besides the file's own that image paths may lead into."""
    env_name = name or Path(path).stem
    data = require_items(load_parquet(path, split, limit, seed, name, type_column, image_roots), env_name,
                         f"file {path}")
    return SingleTurnEnv(env_name, data, ExactMatchGrader())
