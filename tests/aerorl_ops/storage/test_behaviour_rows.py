"""``behaviour_rows``: a run's report rows without its measurements, in key order."""

from __future__ import annotations

import duckdb

from aerorl_ops.storage.behaviour_rows import behaviour_rows


def test_measured_columns_and_the_run_id_are_left_out_and_rows_come_in_key_order(tmp_path):
    database = str(tmp_path / "r.duckdb")
    with duckdb.connect(database) as conn:
        conn.execute("CREATE TABLE generations (run_id VARCHAR, model_key VARCHAR, batch_size INTEGER, "
                     "sample_id VARCHAR, response VARCHAR, latency_ms DOUBLE, dagster_run_id VARCHAR)")
        conn.execute("INSERT INTO generations VALUES ('a', 'm', 4, 's2', 'no', 9.5, 'x'), "
                     "('a', 'm', 1, 's1', 'yes', 3.0, 'y'), ('b', 'm', 1, 's1', 'yes', 7.0, 'z')")
    run_a = behaviour_rows(database, "a", ["generations"])
    assert run_a == {"generations": [("m", 1, "s1", "yes"), ("m", 4, "s2", "no")]}
    assert behaviour_rows(database, "b", ["generations"]) == {"generations": [("m", 1, "s1", "yes")]}
