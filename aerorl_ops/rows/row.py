"""The one row type every dataset loader produces and every later stage reads."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import pyarrow as pa

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
    ]
)
OPTIONAL_COLUMNS = {"prompt": "", "question_type": None}
"""Columns a rows file written before they existed may lack, and the value such a row reads as."""


def image_sha256(image_bytes: bytes) -> str:
    """Hex SHA-256 of encoded image bytes, used to key and deduplicate images."""
    return hashlib.sha256(image_bytes).hexdigest()


@dataclass(frozen=True)
class Row:
    """One visual question: the question, every acceptable answer alias and the encoded image.

    ``answers`` holds every alias a grader accepts; ``answers[0]`` is the canonical one.
    ``evidence_entities`` are the strings visible in the image that support the answer
    (the grounding reward compares claimed entities with them); loaders of real datasets
    that carry no such annotation fill it with the answers.

    ``prompt`` is the text shown with the image, when the dataset has its own (a task
    environment's instruction); empty means the benchmark's JSON-answer prompt around
    ``question``. ``question_type`` groups rows for per-type accuracy (easy-VQA: ``yes_no``,
    ``colour``, ``shape``), None when the dataset has none.
    """

    sample_id: str
    dataset: str
    split: str
    question: str
    answers: tuple[str, ...]
    image_bytes: bytes
    source: str
    evidence_entities: tuple[str, ...] = field(default=())
    image_sha256: str = ""
    prompt: str = ""
    question_type: str | None = None

    def __post_init__(self) -> None:
        if not self.image_sha256:
            object.__setattr__(self, "image_sha256", image_sha256(self.image_bytes))
        object.__setattr__(self, "answers", tuple(self.answers))
        object.__setattr__(self, "evidence_entities", tuple(self.evidence_entities or self.answers))


def rows_to_table(rows: list[Row]) -> pa.Table:
    """Rows as an Arrow table in ``ROW_SCHEMA`` order, ready for Parquet."""
    columns = {name: [] for name in ROW_SCHEMA.names}
    for row in rows:
        for name in ROW_SCHEMA.names:
            value = getattr(row, name)
            columns[name].append(list(value) if isinstance(value, tuple) else value)
    return pa.table(columns, schema=ROW_SCHEMA)


def table_to_rows(table: pa.Table) -> list[Row]:
    """Inverse of :func:`rows_to_table`."""
    for name, value in OPTIONAL_COLUMNS.items():
        if name not in table.column_names:
            table = table.append_column(name, pa.array([value] * table.num_rows, ROW_SCHEMA.field(name).type))
    table = table.select(ROW_SCHEMA.names)
    return [
        Row(
            sample_id=record["sample_id"],
            dataset=record["dataset"],
            split=record["split"],
            question=record["question"],
            answers=tuple(record["answers"]),
            image_bytes=record["image_bytes"],
            source=record["source"],
            evidence_entities=tuple(record["evidence_entities"]),
            image_sha256=record["image_sha256"],
            prompt=record["prompt"],
            question_type=record["question_type"],
        )
        for record in table.to_pylist()
    ]
