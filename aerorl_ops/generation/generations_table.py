"""Generations as a flat Arrow table: one row per sample, the columns of ``GENERATION_SCHEMA``.

This is what the ``generations`` asset caches, what scoring reads column by column and, with the
partition key, what the report writes to DuckDB's ``generations`` table.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from aerorl_ops.generation.batched import GeneratedSample
from aerorl_ops.rows.task_item import TaskItem
from aerorl_ops.storage.schema import GENERATION_FIELDS, GENERATIONS, IMAGE_COUNT, VIDEO_FRAMES, output_schema
from aerorl_ops.text.answers import extract_answer

GENERATION_SCHEMA = output_schema([*GENERATION_FIELDS, GENERATIONS.schema.field("batch_size"), IMAGE_COUNT,
                                   VIDEO_FRAMES])
"""The columns of the ``generations`` table (``aerorl_ops.storage.schema``) that one partition's
generation produces, its batch size, image count and video frames last."""


def claimed_entities(response: str) -> list[str]:
    """What the response claims: its JSON ``answer``, when it has one."""
    answer = extract_answer(response)
    return [answer] if answer else []


def generations_table(rows: Sequence[TaskItem], samples: Sequence[GeneratedSample]) -> pa.Table:
    """Join rows with their generations (matched by sample id) into ``GENERATION_SCHEMA``."""
    by_id = {row.item_id: row for row in rows}
    missing = [s.sample_id for s in samples if s.sample_id not in by_id]
    if missing:
        raise ValueError(f"generations for unknown sample ids: {missing[:5]}")
    records = []
    for sample in samples:
        row = by_id[sample.sample_id]
        records.append({
            "sample_id": sample.sample_id,
            "dataset": row.dataset,
            "prompt": sample.prompt,
            "response": sample.response,
            "raw_response": sample.raw_response,
            "reference": list(row.answers),
            "evidence_entities": list(row.evidence_entities),
            "claimed_entities": claimed_entities(sample.response),
            "latency_ms": sample.latency_ms,
            "batch_latency_ms": sample.batch_latency_ms,
            "generated_tokens": sample.generated_tokens,
            "prompt_text_tokens": sample.prompt_text_tokens,
            "vision_tokens": sample.vision_tokens,
            "batch_index": sample.batch_index,
            "batch_size": sample.batch_size,
            "image_count": sample.image_count,
            "video_frames": sample.video_frames,
        })
    return pa.Table.from_pylist(records, schema=GENERATION_SCHEMA)
