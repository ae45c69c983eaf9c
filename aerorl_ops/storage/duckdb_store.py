"""Idempotent writes to the report database.

A partition write replaces one partition's rows: delete the rows matching the partition key, then
insert, in one transaction. An upsert (``upsert_rows``) replaces only the stored rows that share a
key with the rows it inserts, so rows appended as they happen are never deleted nor duplicated by a
rerun. Values always travel as SQL parameters or registered Arrow tables; only table and column names
from ``TableSpec`` constants in code appear in SQL text.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import NamedTuple

import duckdb
import pyarrow as pa

from aerorl_ops.rows.load_result import RejectedRow
from aerorl_ops.storage.schema import BENCHMARK_TABLES, REJECTED_ROWS, RUNS, TableSpec, output_schema


def ensure_tables(conn: duckdb.DuckDBPyConnection, specs: Iterable[TableSpec] = BENCHMARK_TABLES) -> None:
    """Create each table; in a table made by an older version, rename the columns ``spec.renamed``
    names and add the columns it lacks (nullable: its old rows hold NULL there)."""
    for spec in specs:
        conn.execute(spec.ddl())
        existing = {name for (name,) in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [spec.name]).fetchall()}
        for old, new in spec.renamed:
            if old in existing and new not in existing:
                conn.execute(f"ALTER TABLE {spec.name} RENAME COLUMN {old} TO {new}")
                existing = (existing - {old}) | {new}
        for name, sql_type in spec.columns:
            if name not in existing:
                conn.execute(f"ALTER TABLE {spec.name} ADD COLUMN {name} {sql_type.removesuffix(' NOT NULL')}")


def replace_partition(conn: duckdb.DuckDBPyConnection, spec: TableSpec, key: Mapping[str, object],
                      rows: pa.Table) -> int:
    """Replace the rows of ``spec`` matching ``key`` with ``rows``, atomically. Returns rows inserted."""
    return replace_partitions(conn, [PartitionWrite(spec, key, rows)])[0]


class PartitionWrite(NamedTuple):
    """Rows that replace one partition of one table. ``key`` names exactly its partition columns."""

    spec: TableSpec
    key: Mapping[str, object]
    rows: pa.Table


def replace_partitions(conn: duckdb.DuckDBPyConnection, writes: Sequence[PartitionWrite]) -> list[int]:
    """Apply several partition replacements in ONE transaction: all land, or none do."""
    with transaction(conn):
        return write_partitions(conn, writes)


def write_partitions(conn: duckdb.DuckDBPyConnection, writes: Sequence[PartitionWrite]) -> list[int]:
    """Delete then insert each write's partition, inside the caller's transaction.

    Every row must carry its write's key values (checked), so a write never touches another
    partition. Returns the rows inserted per write.
    """
    staged = [_validated(write) for write in writes]
    for write, rows in zip(writes, staged, strict=True):
        spec = write.spec
        columns = ", ".join(spec.column_names)
        where = " AND ".join(f"{column} = ?" for column in spec.partition_columns)
        conn.execute(f"DELETE FROM {spec.name} WHERE {where}", [write.key[c] for c in spec.partition_columns])
        conn.register("_aerorl_staged", rows)
        conn.execute(f"INSERT INTO {spec.name} ({columns}) SELECT {columns} FROM _aerorl_staged")
        conn.unregister("_aerorl_staged")
    return [rows.num_rows for rows in staged]


def upsert_rows(conn: duckdb.DuckDBPyConnection, spec: TableSpec, key_columns: Sequence[str],
                rows: pa.Table) -> int:
    """Insert ``rows`` into ``spec``'s table, first deleting the stored rows whose ``key_columns`` equal
    those of one of ``rows`` (NULL equals NULL), inside the caller's transaction. Returns rows inserted."""
    unknown = [c for c in key_columns if c not in spec.column_names]
    missing = [c for c in spec.column_names if c not in rows.column_names]
    if unknown or missing:
        raise ValueError(f"{spec.name}: key columns {unknown} are not among its columns, or rows lack {missing}")
    staged = rows.select(list(spec.column_names))
    columns = ", ".join(spec.column_names)
    same_key = " AND ".join(f"{spec.name}.{c} IS NOT DISTINCT FROM _aerorl_upsert.{c}" for c in key_columns)
    conn.register("_aerorl_upsert", staged)  # a failed write leaves it registered: the next one replaces it
    conn.execute(f"DELETE FROM {spec.name} WHERE EXISTS (SELECT 1 FROM _aerorl_upsert WHERE {same_key})")
    conn.execute(f"INSERT INTO {spec.name} ({columns}) SELECT {columns} FROM _aerorl_upsert")
    conn.unregister("_aerorl_upsert")
    return staged.num_rows


@contextmanager
def transaction(conn: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """BEGIN ... COMMIT, or ROLLBACK when the block raises."""
    conn.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _validated(write: PartitionWrite) -> pa.Table:
    spec, key, rows = write
    if set(key) != set(spec.partition_columns):
        raise ValueError(f"{spec.name}: partition key must be {spec.partition_columns}, got {tuple(key)}")
    missing = [name for name in spec.column_names if name not in rows.column_names]
    if missing:
        raise ValueError(f"{spec.name}: rows lack columns {missing}")
    for column in spec.partition_columns:
        values = set(rows.column(column).to_pylist())
        if values - {key[column]}:
            raise ValueError(f"{spec.name}: rows hold {column} values {sorted(map(str, values))}, "
                             f"expected only {key[column]!r}")
    return rows.select(list(spec.column_names))


def write_run(conn: duckdb.DuckDBPyConnection, run: Mapping[str, object]) -> None:
    """Record a run, or widen an existing run's [started_at, finished_at] window (caller's transaction).

    Every partition of a benchmark run calls this with the same ``run_id``; the row keeps the
    first configuration it was given and the earliest start and latest finish.
    """
    columns = RUNS.column_names
    conn.execute(
        f"INSERT INTO runs ({', '.join(columns)}) SELECT {', '.join('?' for _ in columns)} "
        "WHERE NOT EXISTS (SELECT 1 FROM runs WHERE run_id = ?)",
        [run.get(column) for column in columns] + [run["run_id"]],
    )
    conn.execute(
        "UPDATE runs SET started_at = least(started_at, ?), finished_at = greatest(finished_at, ?) "
        "WHERE run_id = ?",
        [run.get("started_at"), run.get("finished_at"), run["run_id"]],
    )


def rejected_rows_table(run_id: str, stage: str, dataset: str, rejected: Sequence[RejectedRow]) -> pa.Table:
    """``rejected_rows`` rows of ``rejected``: the records of ``dataset`` that ``stage`` of run ``run_id``
    did not accept, with the reason of each."""
    return pa.Table.from_pylist(
        [{"run_id": run_id, "stage": stage, "dataset": dataset, "locator": r.locator,
          "sample_id": r.sample_id, "reason": r.reason} for r in rejected],
        schema=output_schema(REJECTED_ROWS.schema),
    )
