"""``aerorl bench``'s closing table (``bench.summary_table``) on a database where partitions failed."""

from __future__ import annotations

import duckdb

from aerorl_pipeline.bench import summary_table

SUMMARY = ("CREATE TABLE benchmark_summary (run_id VARCHAR, model_key VARCHAR, batch_size INTEGER, dataset VARCHAR, "
           "samples INTEGER, accuracy DOUBLE, samples_per_s DOUBLE, generated_tokens_per_s DOUBLE, "
           "latency_p50_ms DOUBLE, latency_p95_ms DOUBLE, pass_rate DOUBLE, peak_memory_mb DOUBLE)")


def test_no_database_or_no_summary_is_a_line_saying_so(tmp_path):
    database = tmp_path / "aerorl.duckdb"
    assert summary_table(str(database), "bench-1") == (f"no report database at {database}: no partition of "
                                                       "benchmark run bench-1 finished")
    duckdb.connect(str(database)).close()  # a fresh database: every partition failed before the report
    assert summary_table(str(database), "bench-1") == (f"no benchmark_summary in {database}: no partition of "
                                                       "benchmark run bench-1 finished")


def test_a_summary_without_a_cost_ledger_has_no_costs(tmp_path):
    database = tmp_path / "aerorl.duckdb"
    with duckdb.connect(str(database)) as conn:
        conn.execute(SUMMARY)
        conn.execute("INSERT INTO benchmark_summary VALUES ('bench-1', 'tiny', 2, 'docvqa', 4, 0.5, 2.0, 10.0, 30.0, "
                     "40.0, 1.0, 100.0)")
    lines = summary_table(str(database), "bench-1").splitlines()
    assert lines[0].split() == ["model_key", "batch_size", "dataset", "samples", "accuracy", "samples_per_s",
                                "tokens_per_s", "p50_ms", "p95_ms", "pass_rate", "peak_mem_mb", "device_s",
                                "cost_per_1k"]
    assert lines[1].split() == ["tiny", "2", "docvqa", "4", "0.5", "2.0", "10.0", "30.0", "40.0", "1.0", "100.0",
                                "None", "None"]
