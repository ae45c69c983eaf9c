"""Task items as the Arrow table of a rows file (``ROW_SCHEMA``), and back.

A rows file holds every image of a question, in order: ``images`` (a list of encoded images) and
``image_sha256``, the hash of the question's images (:func:`images_sha256`: a single image's own
SHA-256, what the column always held). ``sample_id`` is the item id; ``prompt`` is the text of the
item's user turns (``task_item.prompt_text``; empty for an item without messages) and ``messages``
the messages themselves as JSON, so an item reads back exactly as it was written. ``video`` holds a
question's video frames (empty without one) and ``video_fps`` their rate (``task_item.TaskItem``).

Files written before a column existed still load: one with a single ``image_bytes`` column (before
``images``) reads it as the question's one image, one without ``prompt`` reads as empty, one
without ``question_type`` as None, and one without ``messages`` reads each prompt as one user turn
showing the image first and then the prompt (what the benchmark showed; an item without a prompt
has no messages); one without ``video`` / ``video_fps`` reads as no video.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import pyarrow as pa

from aerorl_ops.rows.task_item import Message, TaskItem, image_sha256, prompt_text

ROW_SCHEMA = pa.schema(
    [
        pa.field("sample_id", pa.string(), nullable=False),
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("split", pa.string(), nullable=False),
        pa.field("question", pa.string(), nullable=False),
        pa.field("answers", pa.list_(pa.string()), nullable=False),
        pa.field("images", pa.list_(pa.binary()), nullable=False),
        pa.field("image_sha256", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("evidence_entities", pa.list_(pa.string()), nullable=False),
        pa.field("prompt", pa.string(), nullable=False),
        pa.field("question_type", pa.string()),
        pa.field("messages", pa.string()),
        pa.field("video", pa.list_(pa.binary()), nullable=False),
        pa.field("video_fps", pa.float64()),
    ]
)
OPTIONAL_COLUMNS = {"prompt": "", "question_type": None, "messages": None, "video": [], "video_fps": None}
"""Columns a rows file written before they existed may lack, and the value such a row reads as."""
SINGLE_IMAGE_COLUMN = "image_bytes"
"""The column a rows file written before ``images`` held its question's one image in."""


def images_sha256(images: Sequence[bytes]) -> str:
    """The hash of a question's images: one image's own SHA-256 (what a rows file always recorded), else the
    SHA-256 of the images' hashes, one a line ("" for none).

    >>> images_sha256([b"png"]) == image_sha256(b"png"), images_sha256([]), len(images_sha256([b"a", b"b"]))
    (True, '', 64)
    """
    if len(images) == 1:
        return image_sha256(images[0])
    if not images:
        return ""
    return hashlib.sha256("\n".join(image_sha256(image) for image in images).encode()).hexdigest()


def _record(item: TaskItem) -> dict[str, object]:
    return {"sample_id": item.item_id, "dataset": item.dataset, "split": item.split, "question": item.question,
            "answers": list(item.answers), "images": list(item.images), "image_sha256": images_sha256(item.images),
            "source": item.source, "evidence_entities": list(item.evidence_entities),
            "prompt": prompt_text(item), "question_type": item.question_type,
            "messages": json.dumps(list(item.messages)), "video": list(item.video), "video_fps": item.video_fps}


def items_to_table(items: Sequence[TaskItem]) -> pa.Table:
    """``items`` as an Arrow table in ``ROW_SCHEMA`` order, ready for Parquet."""
    records = [_record(item) for item in items]
    return pa.table({name: [record[name] for record in records] for name in ROW_SCHEMA.names}, schema=ROW_SCHEMA)


def _messages(record: dict[str, object]) -> tuple[Message, ...]:
    if record["messages"] is not None:
        return tuple(json.loads(record["messages"]))
    if not record["prompt"]:
        return ()
    return ({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": record["prompt"]}]},)


def with_images_column(table: pa.Table) -> pa.Table:
    """``table`` with an ``images`` column: a file written before it had its one image as ``image_bytes``."""
    if "images" in table.column_names or SINGLE_IMAGE_COLUMN not in table.column_names:
        return table
    single = table.column(SINGLE_IMAGE_COLUMN).to_pylist()
    return table.append_column("images", pa.array([[image] for image in single], pa.list_(pa.binary())))


def table_to_items(table: pa.Table) -> list[TaskItem]:
    """The items of a rows table (the inverse of :func:`items_to_table`; older files as the module says)."""
    table = with_images_column(table)
    for name, value in OPTIONAL_COLUMNS.items():
        if name not in table.column_names:
            table = table.append_column(name, pa.array([value] * table.num_rows, ROW_SCHEMA.field(name).type))
    return [
        TaskItem(item_id=record["sample_id"], dataset=record["dataset"], split=record["split"],
                 source=record["source"], question=record["question"], answers=tuple(record["answers"]),
                 images=tuple(record["images"]), messages=_messages(record), question_type=record["question_type"],
                 evidence_entities=tuple(record["evidence_entities"]), video=tuple(record["video"]),
                 video_fps=record["video_fps"])
        for record in table.select(ROW_SCHEMA.names).to_pylist()
    ]
