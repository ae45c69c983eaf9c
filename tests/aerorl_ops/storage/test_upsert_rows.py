"""``upsert_rows``: rows replace the stored rows of their own key only, in the caller's transaction."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from aerorl_ops.storage.duckdb_store import ensure_tables, transaction, upsert_rows
from aerorl_ops.storage.training_schema import TRAINING_EVALS

KEY = ("run_id", "step", "phase")


def evals(*rows: tuple[str, int, str | None, float]) -> pa.Table:
    return pa.Table.from_pylist([{"run_id": r, "step": s, "phase": p, "accuracy": a} for r, s, p, a in rows],
                                schema=TRAINING_EVALS.schema)


def test_a_row_replaces_the_stored_row_of_its_key_and_no_other():
    with duckdb.connect(":memory:") as conn:
        ensure_tables(conn, [TRAINING_EVALS])
        upsert_rows(conn, TRAINING_EVALS, KEY, evals(("a", 0, "base", 0.1), ("a", 2, "warmup", 0.2),
                                                     ("b", 2, "warmup", 0.3), ("a", 3, None, 0.4)))
        assert upsert_rows(conn, TRAINING_EVALS, KEY, evals(("a", 2, "warmup", 0.5), ("a", 3, None, 0.6))) == 2
        stored = conn.execute("SELECT run_id, step, phase, accuracy FROM training_evals ORDER BY 1, 2").fetchall()
    assert stored == [("a", 0, "base", 0.1), ("a", 2, "warmup", 0.5), ("a", 3, None, 0.6), ("b", 2, "warmup", 0.3)]


def test_an_upsert_that_fails_changes_nothing():
    with duckdb.connect(":memory:") as conn:
        ensure_tables(conn, [TRAINING_EVALS])
        upsert_rows(conn, TRAINING_EVALS, KEY, evals(("a", 0, "base", 0.1)))
        with pytest.raises(duckdb.ConstraintException), transaction(conn):
            upsert_rows(conn, TRAINING_EVALS, KEY, evals(("a", 0, "base", 0.9), (None, 1, "base", 0.2)))
        assert conn.execute("SELECT accuracy FROM training_evals").fetchall() == [(0.1,)]


def test_an_unknown_key_column_is_named():
    with duckdb.connect(":memory:") as conn, pytest.raises(ValueError, match=r"key columns \['epoch'\]"):
        upsert_rows(conn, TRAINING_EVALS, ("run_id", "epoch"), evals(("a", 0, "base", 0.1)))
