"""Generations as replay records: the format the reward stack and ``aerorl replay`` read.

One record per sample::

    {"id", "prompt", "response", "reference": [every alias],
     "metadata": {"evidence_entities", "claimed_entities", "latency_ms", "generated_tokens",
                  "dataset", "raw_response", "batch_latency_ms", "prompt_text_tokens",
                  "vision_tokens", "batch_index", "batch_size"}}

The same data as a flat Arrow table (one column per field) is what the ``generations`` asset
caches and the report writes to DuckDB.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from aerorl_ops.generation.answers import extract_answer
from aerorl_ops.generation.batched import GeneratedSample
from aerorl_ops.rows.row import Row

GENERATION_SCHEMA = pa.schema([
    ("sample_id", pa.string()),
    ("dataset", pa.string()),
    ("prompt", pa.string()),
    ("response", pa.string()),
    ("raw_response", pa.string()),
    ("reference", pa.list_(pa.string())),
    ("evidence_entities", pa.list_(pa.string())),
    ("claimed_entities", pa.list_(pa.string())),
    ("latency_ms", pa.float64()),
    ("batch_latency_ms", pa.float64()),
    ("generated_tokens", pa.int32()),
    ("prompt_text_tokens", pa.int32()),
    ("vision_tokens", pa.int32()),
    ("batch_index", pa.int32()),
    ("batch_size", pa.int32()),
])

_METADATA_FIELDS = ("evidence_entities", "claimed_entities", "latency_ms", "generated_tokens", "dataset",
                    "raw_response", "batch_latency_ms", "prompt_text_tokens", "vision_tokens", "batch_index",
                    "batch_size")


def claimed_entities(response: str) -> list[str]:
    """What the response claims: its JSON ``answer``, when it has one."""
    answer = extract_answer(response)
    return [answer] if answer else []


def generations_table(rows: Sequence[Row], samples: Sequence[GeneratedSample]) -> pa.Table:
    """Join rows with their generations (matched by sample id) into ``GENERATION_SCHEMA``."""
    by_id = {row.sample_id: row for row in rows}
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
        })
    return pa.Table.from_pylist(records, schema=GENERATION_SCHEMA)


def replay_records(table: pa.Table) -> list[dict]:
    """``GENERATION_SCHEMA`` rows as replay records (JSON-ready dicts)."""
    return [
        {
            "id": record["sample_id"],
            "prompt": record["prompt"],
            "response": record["response"],
            "reference": record["reference"],
            "metadata": {name: record[name] for name in _METADATA_FIELDS},
        }
        for record in table.to_pylist()
    ]
