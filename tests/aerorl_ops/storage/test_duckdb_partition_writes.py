"""Partition writes to the report database: replace, never duplicate, all-or-nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import duckdb
import pyarrow as pa
import pytest

from aerorl_ops.storage.duckdb_store import (
    PartitionWrite,
    ensure_tables,
    replace_partition,
    replace_partitions,
    transaction,
    write_run,
)
from aerorl_ops.storage.schema import GENERATIONS, REWARD_SCORES, RUNS, TableSpec

KEY = {"run_id": "r1", "model_key": "tiny", "batch_size": 4}


def partition_rows(spec: TableSpec, sample_ids: list[str | None], key=KEY, **columns) -> pa.Table:
    """Rows of ``spec`` for ``key``: the given columns, NULL elsewhere."""
    records = [{name: None for name in spec.column_names} | dict(key, sample_id=sample_id)
               | {name: values[i] for name, values in columns.items()} for i, sample_id in enumerate(sample_ids)]
    return pa.Table.from_pylist(records)


@pytest.fixture
def conn():
    with duckdb.connect(":memory:") as connection:
        ensure_tables(connection)
        yield connection


def rows_of(conn, table: str) -> list[tuple]:
    return conn.execute(f"SELECT run_id, model_key, batch_size, sample_id FROM {table} "
                        "ORDER BY run_id, batch_size, sample_id").fetchall()


def test_replacing_a_partition_twice_leaves_one_copy_and_other_partitions_alone(conn):
    other = dict(KEY, batch_size=8)
    replace_partition(conn, GENERATIONS, other, partition_rows(GENERATIONS, ["x"], key=other))
    assert replace_partition(conn, GENERATIONS, KEY, partition_rows(GENERATIONS, ["a", "b", "c"])) == 3
    assert replace_partition(conn, GENERATIONS, KEY, partition_rows(GENERATIONS, ["a", "d"])) == 2
    assert rows_of(conn, "generations") == [("r1", "tiny", 4, "a"), ("r1", "tiny", 4, "d"), ("r1", "tiny", 8, "x")]


def test_list_and_number_values_arrive_intact(conn):
    rows = partition_rows(GENERATIONS, ["a"], reference=[["12%", "12"]], latency_ms=[12.5],
                          response=['{"answer": "12"}'])
    replace_partition(conn, GENERATIONS, KEY, rows)
    assert conn.execute("SELECT reference, latency_ms, response FROM generations").fetchall() == [
        (["12%", "12"], 12.5, '{"answer": "12"}')]


def test_a_failing_second_write_rolls_back_the_first(conn):
    replace_partition(conn, GENERATIONS, KEY, partition_rows(GENERATIONS, ["old-1", "old-2"]))
    replace_partition(conn, REWARD_SCORES, KEY, partition_rows(REWARD_SCORES, ["old-1", "old-2"]))
    writes = [
        PartitionWrite(GENERATIONS, KEY, partition_rows(GENERATIONS, ["new-1"])),
        PartitionWrite(REWARD_SCORES, KEY, partition_rows(REWARD_SCORES, ["new-1", None])),  # NOT NULL fails
    ]
    with pytest.raises(duckdb.ConstraintException):
        replace_partitions(conn, writes)
    assert [r[3] for r in rows_of(conn, "generations")] == ["old-1", "old-2"]
    assert [r[3] for r in rows_of(conn, "reward_scores")] == ["old-1", "old-2"]
    # the connection is usable afterwards: the transaction was closed, not left open
    assert replace_partitions(conn, writes[:1]) == [1]
    assert [r[3] for r in rows_of(conn, "generations")] == ["new-1"]


def test_rows_of_another_partition_are_refused_before_anything_is_written(conn):
    replace_partition(conn, GENERATIONS, KEY, partition_rows(GENERATIONS, ["old"]))
    stray = partition_rows(GENERATIONS, ["new"], key=dict(KEY, batch_size=8))
    with pytest.raises(ValueError, match="batch_size"):
        replace_partition(conn, GENERATIONS, KEY, stray)
    with pytest.raises(ValueError, match="partition key"):
        replace_partition(conn, GENERATIONS, {"run_id": "r1"}, partition_rows(GENERATIONS, ["new"]))
    assert [r[3] for r in rows_of(conn, "generations")] == ["old"]


def test_a_sql_looking_value_is_stored_as_data(conn):
    hostile = {"run_id": "r1'; DROP TABLE generations; --", "model_key": "tiny", "batch_size": 4}
    replace_partition(conn, GENERATIONS, hostile, partition_rows(GENERATIONS, ["a"], key=hostile))
    assert conn.execute("SELECT run_id FROM generations").fetchall() == [(hostile["run_id"],)]


def at(hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 1, 2, hour, minute, tzinfo=UTC)


def record_run(conn: duckdb.DuckDBPyConnection, run: dict) -> None:
    """As the report asset records its run: ``write_run`` in the caller's transaction."""
    with transaction(conn):
        write_run(conn, run)


def test_write_run_keeps_one_row_and_widens_its_window(conn):
    first = {"run_id": "bench-1", "kind": "benchmark", "started_at": at(10), "finished_at": at(10, 5),
             "git_sha": "abc", "config": json.dumps({"batch_sizes": [1]}), "seeds": json.dumps({"benchmark": 0}),
             "library_versions": json.dumps({"torch": "2"}), "input_hashes": json.dumps({})}
    record_run(conn, first)
    record_run(conn, dict(first, started_at=at(9, 55), finished_at=at(10, 3), config=json.dumps({"other": 1})))
    record_run(conn, dict(first, started_at=at(10, 1), finished_at=at(10, 30)))
    record_run(conn, dict(first, run_id="bench-2", started_at=at(11), finished_at=at(11, 1)))
    rows = conn.execute("SELECT run_id, started_at, finished_at, config FROM runs ORDER BY run_id").fetchall()
    assert [(r[0], r[1], r[2]) for r in rows] == [("bench-1", at(9, 55), at(10, 30)), ("bench-2", at(11), at(11, 1))]
    assert json.loads(rows[0][3]) == {"batch_sizes": [1]}  # the first configuration is kept
    assert set(RUNS.column_names) == {d[0] for d in conn.execute("SELECT * FROM runs").description}
