"""Reliability: partitions materialized in parallel never fail on DuckDB's lock and lose no rows.

Three runs of the real ``benchmark`` job (batch sizes 1, 4 and 8) start at once, each in a process
of its own (``partition_driver.py``), against one DuckDB file, one Parquet cache and one Dagster
instance directory whose ``dagster.yaml`` sets ``concurrency: pools: default_limit: 1``.

What enforces the pool: the executor itself. Before a step with a ``pool`` starts, ``ActiveExecution``
claims a slot in the instance's event-log storage (``InstanceConcurrencyContext``), in the
in-process and the multiprocess executor alike, so ``execute_in_process`` / ``execute_job`` runs
are limited too, not only runs launched through the queue. Two conditions: the storage must have
concurrency tables (SQLite or Postgres; the ephemeral in-memory instance has none, so there pools
are silently not enforced) and pool granularity must be ``op`` or unset (``granularity: run``
leaves it to the queued run coordinator, which checks pools only when it launches queued runs).

The test makes the enforcement observable and the contention real: it holds the only
``duckdb_writer`` slot itself until every run's ``benchmark_report`` step waits on it, then lets
go, and checks the three reports wrote one after another.

Notes from building this test: ``execute_job`` in several threads of one process deadlocks in
``logging`` (each run calls ``logging.config.dictConfig`` while another thread's handler holds
its lock), so the runs are separate processes; and a fresh SQLite ``DAGSTER_HOME`` must be
created once before processes share it (concurrent first use races on the schema's alembic
stamp: "Version table 'alembic_version' has more than one head present"). The runs use the
in-process executor: the multiprocess executor goes through the same slot claims (checked by
hand with ``partition_driver.py --executor multiprocess``) but starts a process per step, about
two minutes for three runs on two shared cores.
"""

from __future__ import annotations

import time
from itertools import pairwise
from pathlib import Path

import dagster as dg
import pytest

POOL = "duckdb_writer"
BATCH_SIZES = (1, 4, 8)
RUN_TAG = "concurrent-partitions"
ROWS_ASSETS = ("docvqa_rows", "chartqa_rows", "easy_vqa_rows", "arc_rows")
SAMPLES = 8  # conftest's 2 rows of each of the shipped 4 datasets
ARC_SAMPLES = 2  # generated last, in batches of their own (ARC's own max_new_tokens)
BLOCKED_MESSAGE = f"Step blocked by limit for pool {POOL}"


@pytest.fixture
def dagster_home(tmp_path: Path) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("concurrency:\n  pools:\n    default_limit: 1\ntelemetry:\n  enabled: false\n")
    return home


def wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.2)


def report_window(instance: dg.DagsterInstance, run_id: str) -> tuple[float, float]:
    """When this run's ``benchmark_report`` step started and succeeded."""
    events = {event.dagster_event.event_type: event.timestamp for event in instance.all_logs(run_id)
              if event.dagster_event is not None and event.step_key == "benchmark_report"}
    return events[dg.DagsterEventType.STEP_START], events[dg.DagsterEventType.STEP_SUCCESS]


def batch_indices(size: int) -> list[int]:
    """The partition's batch of each row: the other datasets' rows in batches of ``size``, then ARC's in the
    batches after them (size 4: [0, 0, 0, 0, 1, 1, 2, 2])."""
    others = [i // size for i in range(SAMPLES - ARC_SAMPLES)]
    return others + [others[-1] + 1 + i // size for i in range(ARC_SAMPLES)]


@pytest.mark.slow
def test_parallel_partitions_all_succeed_and_keep_exactly_their_rows(bench, launch_partition, dagster_home):
    rows = bench.materialize_rows(RUN_TAG)
    input_ids = sorted(sample_id for name in ROWS_ASSETS
                       for sample_id in rows.output_for_node(name).column("sample_id").to_pylist())

    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:  # created once, before sharing
        storage = instance.event_log_storage
        assert storage.supports_global_concurrency_limits
        storage.initialize_concurrency_limit_to_default(POOL)
        assert storage.get_concurrency_info(POOL).slot_count == 1  # the dagster.yaml default_limit
        assert storage.claim_concurrency_slot(POOL, "test-holder", "hold", 0).is_claimed

        def waiting_reports() -> set[str]:
            pending = storage.get_concurrency_info(POOL).pending_steps
            return {step.run_id for step in pending if step.step_key == "benchmark_report"}

        processes = [launch_partition(bench.env.root, size, RUN_TAG, "--dagster-home", str(dagster_home))
                     for size in BATCH_SIZES]
        try:
            wait_for(lambda: len(waiting_reports()) == len(BATCH_SIZES)
                     or any(p.popen.poll() is not None for p in processes),
                     timeout_s=150, what="every benchmark_report step to wait for the duckdb_writer slot")
        finally:
            storage.free_concurrency_slot_for_step("test-holder", "hold")
        results = {size: process.result() for size, process in zip(BATCH_SIZES, processes, strict=True)}

        assert {size: result["success"] for size, result in results.items()} == dict.fromkeys(BATCH_SIZES, True)
        windows = []
        for result in results.values():
            messages = [event.message for event in instance.all_logs(result["run_id"])
                        if event.step_key == "benchmark_report"]
            assert BLOCKED_MESSAGE in messages
            windows.append(report_window(instance, result["run_id"]))
        windows.sort()
        assert all(end <= next_start for (_, end), (next_start, _) in pairwise(windows)), windows
        assert storage.get_concurrency_info(POOL).claimed_slots == []

    for size in BATCH_SIZES:
        assert bench.partition_counts(RUN_TAG, size) == {"generations": SAMPLES, "reward_scores": SAMPLES,
                                                         "benchmark_summary": len(ROWS_ASSETS)}
        stored = bench.query("SELECT sample_id FROM generations WHERE run_id = ? AND batch_size = ?", [RUN_TAG, size])
        assert sorted(sample for sample, in stored) == input_ids
        summary = bench.query("SELECT dataset, samples FROM benchmark_summary WHERE run_id = ? AND batch_size = ? "
                              "ORDER BY dataset", [RUN_TAG, size])
        assert summary == [("arc", 2), ("chartqa", 2), ("docvqa", 2), ("easy_vqa", 2)]  # one row per dataset
    assert bench.query("SELECT count(*) FROM generations")[0][0] == SAMPLES * len(BATCH_SIZES)
    assert bench.query("SELECT count(*) FROM runs WHERE run_id = ?", [RUN_TAG])[0][0] == 1
    batches = {size: sorted(index for index, in bench.query("SELECT batch_index FROM generations WHERE run_id = ? "
                                                            "AND batch_size = ?", [RUN_TAG, size]))
               for size in BATCH_SIZES}
    assert batches == {size: batch_indices(size) for size in BATCH_SIZES}


def test_an_ephemeral_instance_cannot_enforce_pools(dagster_home):
    """Why the test above needs a DAGSTER_HOME: in-memory storage has no concurrency tables, so
    runs on ``DagsterInstance.ephemeral()`` (as most tests use) ignore every pool limit."""
    with dg.DagsterInstance.ephemeral() as ephemeral:
        assert not ephemeral.event_log_storage.supports_global_concurrency_limits
    with dg.DagsterInstance.from_config(str(dagster_home)) as persistent:
        assert persistent.event_log_storage.supports_global_concurrency_limits
        assert persistent.event_log_storage.get_pool_config().default_pool_limit == 1
