"""Has a run finished? Asked before anything loads; a database another process is writing cannot say so
(the run's own lock decides), so it reads as not finished instead of failing the command."""

from __future__ import annotations

from datetime import datetime

import duckdb

from aerorl_ops.storage.finished_runs import finished_at

WHEN = datetime(2026, 1, 2, 3, 4, 5)


def test_a_run_is_finished_only_at_its_step_count(tmp_path):
    database = tmp_path / "aerorl.duckdb"
    with duckdb.connect(str(database)) as conn:
        conn.execute("CREATE TABLE training_runs (run_id VARCHAR, steps INTEGER, finished_at TIMESTAMP)")
        conn.execute("INSERT INTO training_runs VALUES ('done', 8, ?), ('going', 8, NULL)", [WHEN])
    assert (finished_at(database, "done", 8), finished_at(database, "done", 9)) == (WHEN, None)
    assert (finished_at(database, "going", 8), finished_at(database, "other", 8)) == (None, None)


def test_a_database_held_open_for_writing_reads_as_not_finished(tmp_path):
    database = tmp_path / "aerorl.duckdb"
    with duckdb.connect(str(database)) as writer:
        writer.execute("CREATE TABLE training_runs (run_id VARCHAR, steps INTEGER, finished_at TIMESTAMP)")
        writer.execute("INSERT INTO training_runs VALUES ('done', 8, ?)", [WHEN])
        assert finished_at(database, "done", 8) is None  # held open by the writer
    assert finished_at(database, "done", 8) == WHEN
