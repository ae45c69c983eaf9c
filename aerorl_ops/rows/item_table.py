"""Task items as the Arrow table of a rows file (``ROW_SCHEMA``), and back.

A rows file holds one image per question (the benchmark shows one): ``image_bytes`` and its
``image_sha256``. ``sample_id`` is the item id; ``prompt`` is the text of the item's user turns
(``task_item.prompt_text``; empty for an item without messages) and ``messages`` the messages
themselves as JSON, so an item reads back exactly as it was written.

Files written before a column existed still load: one without ``prompt`` reads as empty, one without
``question_type`` as None, and one without ``messages`` reads each prompt as one user turn showing the
image first and then the prompt (what the benchmark showed; an item without a prompt has no messages).
"""

from __future__ import annotations

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
        pa.field("image_bytes", pa.binary(), nullable=False),
        pa.field("image_sha256", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("evidence_entities", pa.list_(pa.string()), nullable=False),
        pa.field("prompt", pa.string(), nullable=False),
        pa.field("question_type", pa.string()),
        pa.field("messages", pa.string()),
    ]
)
OPTIONAL_COLUMNS = {"prompt": "", "question_type": None, "messages": None}
"""Columns a rows file written before they existed may lack, and the value such a row reads as."""


def _record(item: TaskItem) -> dict[str, object]:
    if len(item.images) != 1:
        raise ValueError(f"item {item.item_id!r} ({item.source}) has {len(item.images)} images; a rows file "
                         "holds one image per question")
    (image,) = item.images
    return {"sample_id": item.item_id, "dataset": item.dataset, "split": item.split, "question": item.question,
            "answers": list(item.answers), "image_bytes": image, "image_sha256": image_sha256(image),
            "source": item.source, "evidence_entities": list(item.evidence_entities),
            "prompt": prompt_text(item), "question_type": item.question_type,
            "messages": json.dumps(list(item.messages))}


def items_to_table(items: Sequence[TaskItem]) -> pa.Table:
    """``items`` as an Arrow table in ``ROW_SCHEMA`` order, ready for Parquet; an item with other than one
    image is a ``ValueError`` naming it."""
    records = [_record(item) for item in items]
    return pa.table({name: [record[name] for record in records] for name in ROW_SCHEMA.names}, schema=ROW_SCHEMA)


def _messages(record: dict[str, object]) -> tuple[Message, ...]:
    if record["messages"] is not None:
        return tuple(json.loads(record["messages"]))
    if not record["prompt"]:
        return ()
    return ({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": record["prompt"]}]},)


def table_to_items(table: pa.Table) -> list[TaskItem]:
    """The items of a rows table (the inverse of :func:`items_to_table`; older files as the module says)."""
    for name, value in OPTIONAL_COLUMNS.items():
        if name not in table.column_names:
            table = table.append_column(name, pa.array([value] * table.num_rows, ROW_SCHEMA.field(name).type))
    return [
        TaskItem(item_id=record["sample_id"], dataset=record["dataset"], split=record["split"],
                 source=record["source"], question=record["question"], answers=tuple(record["answers"]),
                 images=(record["image_bytes"],), messages=_messages(record), question_type=record["question_type"],
                 evidence_entities=tuple(record["evidence_entities"]))
        for record in table.select(ROW_SCHEMA.names).to_pylist()
    ]
