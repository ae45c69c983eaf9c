"""Checks on a generations table before it is scored or reported.

A generation is rejected, never silently dropped, when a measurement it carries is impossible:
a latency (``latency_ms``, ``batch_latency_ms``) that is missing, NaN, infinite or negative, or a
token count (``generated_tokens``, ``prompt_text_tokens``, ``vision_tokens``) that is missing or
negative. Every row of the input ends up in exactly one of the accepted table or the rejections. A table
cached before ``image_count`` or ``video_frames`` existed gains it as NULL (its rows' count was not recorded).
"""

from __future__ import annotations

import math

import pyarrow as pa

from aerorl_ops.rows.load_result import RejectedRow
from aerorl_ops.storage.schema import IMAGE_COUNT, VIDEO_FRAMES

SOURCE = "generations"
LATENCY_COLUMNS = ("latency_ms", "batch_latency_ms")
COUNT_COLUMNS = ("generated_tokens", "prompt_text_tokens", "vision_tokens")


def generation_problems(record: dict) -> list[str]:
    """Why one generations record is unusable; empty when it is fine.

    >>> generation_problems({"latency_ms": float("nan"), "batch_latency_ms": 5.0, "generated_tokens": -1,
    ...                      "prompt_text_tokens": 3, "vision_tokens": 4})
    ['latency_ms is NaN', 'generated_tokens is negative (-1)']
    """
    problems = []
    for name in LATENCY_COLUMNS:
        value = record[name]
        if value is None:
            problems.append(f"{name} is missing")
        elif math.isnan(value):
            problems.append(f"{name} is NaN")
        elif math.isinf(value):
            problems.append(f"{name} is infinite ({value})")
        elif value < 0:
            problems.append(f"{name} is negative ({value})")
    for name in COUNT_COLUMNS:
        value = record[name]
        if value is None:
            problems.append(f"{name} is missing")
        elif value < 0:
            problems.append(f"{name} is negative ({value})")
    return problems


def split_valid_generations(table: pa.Table) -> tuple[pa.Table, list[RejectedRow]]:
    """The rows of ``table`` with plausible measurements, and a :class:`RejectedRow` for each other row.

    The accepted table keeps the input's schema and schema metadata (the partition stats ride
    along). A rejection's ``locator`` is the sample id (``generations#row=<i>`` when it is null)
    and its reason lists every problem found, separated by ``"; "``.
    """
    missing = [name for name in ("sample_id", *LATENCY_COLUMNS, *COUNT_COLUMNS) if name not in table.column_names]
    if missing:
        raise ValueError(f"generations table lacks columns {missing}; expected GENERATION_SCHEMA")
    for added in (IMAGE_COUNT, VIDEO_FRAMES):
        if added.name not in table.column_names:
            table = table.append_column(added, pa.nulls(table.num_rows, added.type))
    keep = []
    rejected = []
    records = table.select(["sample_id", *LATENCY_COLUMNS, *COUNT_COLUMNS]).to_pylist()
    for index, record in enumerate(records):
        problems = generation_problems(record)
        sample_id = record["sample_id"]
        if sample_id is None:
            problems.insert(0, "missing sample id")
        keep.append(not problems)
        if problems:
            locator = sample_id if sample_id is not None else f"{SOURCE}#row={index}"
            rejected.append(RejectedRow(SOURCE, locator, sample_id, "; ".join(problems)))
    return table.filter(pa.array(keep, pa.bool_())), rejected
