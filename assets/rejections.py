"""Rejected input rows land in DuckDB's ``rejected_rows`` with their reasons (rows built by
``aerorl_ops.storage.duckdb_store.rejected_rows_table``)."""

from __future__ import annotations

from collections.abc import Sequence

from dagster_duckdb import DuckDBResource

from aerorl_ops.rows.load_result import RejectedRow
from aerorl_ops.storage.duckdb_store import ensure_tables, rejected_rows_table, replace_partition
from aerorl_ops.storage.schema import REJECTED_ROWS


def record_rejections(duckdb: DuckDBResource, run_id: str, stage: str, dataset: str,
                      rejected: Sequence[RejectedRow]) -> None:
    """Replace this run's rejections for ``stage``/``dataset`` (an empty list clears them)."""
    with duckdb.get_connection() as conn:
        ensure_tables(conn)
        replace_partition(conn, REJECTED_ROWS, {"run_id": run_id, "stage": stage, "dataset": dataset},
                          rejected_rows_table(run_id, stage, dataset, rejected))
