"""``aerorl bench``'s closing table (``bench.summary_table``) on a database where partitions failed."""

from __future__ import annotations

import subprocess
import sys

import duckdb

from aerorl_pipeline import bench
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


def hold_write_lock(database, seconds: float) -> subprocess.Popen:
    """Another process (a training run beside the bench) holding ``database``'s write lock for ``seconds``."""
    code = (f"import duckdb, time\nc = duckdb.connect({str(database)!r})\nprint('locked', flush=True)\n"
            f"time.sleep({seconds})")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    return holder


def test_the_summary_waits_for_another_commands_write_and_is_only_left_out_when_it_lasts(tmp_path, monkeypatch):
    """A chaos run's bench wrote every row and then exited 1: a training run beside it held the write lock
    as the bench read its summary."""
    database = tmp_path / "aerorl.duckdb"
    with duckdb.connect(str(database)) as conn:
        conn.execute(SUMMARY)
        conn.execute("INSERT INTO benchmark_summary VALUES ('bench-1', 'tiny', 2, 'docvqa', 4, 0.5, 2.0, 10.0, 30.0, "
                     "40.0, 1.0, 100.0)")
    holder = hold_write_lock(database, 2.0)
    try:
        assert summary_table(str(database), "bench-1").splitlines()[1].split()[:3] == ["tiny", "2", "docvqa"]
    finally:
        holder.wait()
    monkeypatch.setattr(bench, "REPORT_LOCK_WAIT_S", 0.5)
    holder = hold_write_lock(database, 30.0)
    try:
        shown = summary_table(str(database), "bench-1")
    finally:
        holder.kill()
        holder.wait()
    assert shown.startswith(f"the summary is not shown: {database} is locked by a writer (")
    assert shown.endswith("and stayed locked for 0.5 s: run the query again when its write ends")
