"""A benchmark run's report rows with its measurements left out: what two runs of the same code on
the same inputs must agree on, wherever and however they ran (a refactor check, an in-process run
against a distributed one).

``MEASURED`` names, per report table, the columns that measure time, memory or the process
(``TRAINING_MEASURED``: those of the training tables);
``LATENCY_DEPENDENT`` the behaviour columns that still depend on a measured latency through the cost
reward (equal only when no latency exceeds the reward's budget).
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

MEASURED = {
    "generations": {"latency_ms", "batch_latency_ms", "dagster_run_id"},
    "reward_scores": set(),
    "benchmark_summary": {
        "wall_s", "samples_per_s", "generated_tokens_per_s", "latency_avg_ms", "latency_p50_ms",
        "latency_p95_ms", "model_load_s", "peak_memory_mb", "gpu_seen", "gpu_util_avg", "gpu_util_max",
        "gpu_memory_avg_mb", "gpu_memory_max_mb", "gpu_power_avg_w", "cpu_percent_avg", "rss_max_mb",
        "created_at",
    },
    "runs": {"started_at", "finished_at", "git_sha", "library_versions"},
    "rejected_rows": set(),
}
TRAINING_MEASURED = {"step_s", "tokens_per_s", "peak_memory_mb", "wall_s", "rollout_s", "scoring_s", "update_s"}
"""Columns of the training tables that measure time or memory: they differ between any two runs."""
LATENCY_DEPENDENT = {"reward_scores": {"cost", "total_reward", "passed"},
                     "benchmark_summary": {"cost_avg", "average_reward", "pass_rate"}}
KEYS = {"generations": ["model_key", "batch_size", "sample_id"],
        "reward_scores": ["model_key", "batch_size", "sample_id"],
        "benchmark_summary": ["model_key", "batch_size"],
        "runs": [], "rejected_rows": ["stage", "dataset", "locator", "sample_id", "reason"]}
"""Each table's row order."""


def columns(conn: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str]]:
    """(name, type) of every column of ``table``."""
    return [(name, kind) for name, kind, *_ in conn.execute(f'DESCRIBE "{table}"').fetchall()]


def behaviour_columns(conn: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    """The columns of ``table`` that are not measurements."""
    return [name for name, _ in columns(conn, table) if name not in MEASURED[table]]


def rows(conn: duckdb.DuckDBPyConnection, table: str, run_id: str, names: Sequence[str]) -> list[tuple]:
    """``run_id``'s rows of ``table``, columns ``names`` less ``run_id``, in the table's key order."""
    selected = ", ".join(f'"{name}"' for name in names if name != "run_id")
    order = ", ".join(f'"{key}"' for key in KEYS[table]) or "1"
    return conn.execute(f'SELECT {selected} FROM "{table}" WHERE run_id = ? ORDER BY {order}', [run_id]).fetchall()


def behaviour_rows(database: str, run_id: str, tables: Sequence[str]) -> dict[str, list[tuple]]:
    """Each of ``tables``' rows of ``run_id`` with the measured columns (and ``run_id``) left out."""
    with duckdb.connect(database, read_only=True) as conn:
        return {table: rows(conn, table, run_id, behaviour_columns(conn, table)) for table in tables}
