"""A dead run's pool slots are freed (issue 38, item 1): by the command line as it opens the instance, and by the
``pool_slots`` sensor that ``dagster dev``'s daemon runs for the UI's and the schedule's runs. A live run keeps
its slot; a finished run that still holds one (a process killed between its end and its last write) is freed."""

from __future__ import annotations

import doctest
import logging
import signal
import time
from pathlib import Path

import dagster as dg
import pytest

import aerorl_pipeline.pool_slots as pool_slots_module
import aerorl_pipeline.slot_wait as slot_wait_module
from aerorl_pipeline.definitions import build_definitions
from aerorl_pipeline.instance import local_instance
from aerorl_pipeline.pool_slots import SlotClaim, free_dead_runs_slots, pool_claims
from aerorl_pipeline.sensors import POOL_SLOTS_SENSOR, build_pool_slots_sensor
from tests.aerorl_pipeline.holder_runs import start_holder

POOL = "duckdb_writer"


def test_the_docstring_examples_hold():
    for module in (pool_slots_module, slot_wait_module):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


@pytest.fixture
def home(tmp_path: Path, monkeypatch) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("concurrency:\n  pools:\n    default_limit: 1\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


def held_slot(instance: dg.DagsterInstance, name: str, timeout_s: float = 180.0) -> str:
    """The run id of holder ``name`` once its step holds the pool's slot (a wait for the child process)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"holder": name}))
        held = {claim.run_id for claim in pool_claims(instance) if claim.holding}
        if runs and runs[0].run_id in held:
            return runs[0].run_id
        time.sleep(0.2)
    raise AssertionError(f"holder {name} held no slot within {timeout_s} s")


@pytest.fixture
def killed_holder(home):
    """A run killed with SIGKILL while its step held the pool's only slot: (its run id, its claims)."""
    with dg.DagsterInstance.get() as instance:  # creates the home's storage before the child shares it
        holder = start_holder("killed", home, POOL)
        try:
            run_id = held_slot(instance, "killed")
        finally:
            holder.send_signal(signal.SIGKILL)
            holder.wait()
        yield run_id, pool_claims(instance)


def test_a_killed_holder_leaves_its_slot_claimed(killed_holder):
    run_id, claims = killed_holder
    assert [(c.pool, c.run_id, c.step_key, c.holding) for c in claims] == [(POOL, run_id, "hold", True)]


def test_opening_the_instance_fails_the_dead_run_and_frees_its_slot_naming_it(killed_holder, caplog):
    run_id, _ = killed_holder
    with caplog.at_level(logging.WARNING, logger="aerorl_pipeline.pool_slots"), local_instance() as instance:
        assert pool_claims(instance) == []
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE
        assert instance.event_log_storage.get_concurrency_info(POOL).limit == 1  # the limit stays
    lines = [r.getMessage() for r in caplog.records if r.name == "aerorl_pipeline.pool_slots"]
    assert lines[-1] == (f"freed the duckdb_writer slot of step hold of run {run_id} (FAILURE): its process cannot "
                         "free them")


def test_the_sensor_frees_a_dead_runs_slot_for_the_uis_runs(killed_holder):
    run_id, _ = killed_holder
    assert POOL_SLOTS_SENSOR in [sensor.name for sensor in build_definitions().sensors]
    sensor = build_pool_slots_sensor()
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    with dg.DagsterInstance.get() as instance:
        result = sensor(dg.build_sensor_context(instance=instance))
        assert pool_claims(instance) == []
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE
    assert result.skip_message == f"runs marked failed: ['{run_id}']; runs whose pool slots were freed: ['{run_id}']"


def test_a_live_holder_keeps_its_slot_and_a_finished_one_loses_it(home):
    with dg.DagsterInstance.get() as instance:
        holder = start_holder("alive", home, POOL)
        try:
            run_id = held_slot(instance, "alive")
            assert free_dead_runs_slots(instance) == []
            assert [c.run_id for c in pool_claims(instance) if c.holding] == [run_id]
            instance.report_run_canceled(instance.get_run_by_id(run_id))  # finished, its process not yet gone
            assert free_dead_runs_slots(instance) == [run_id]
            assert pool_claims(instance) == []
        finally:
            holder.kill()
            holder.wait()


def test_a_claim_of_a_run_the_instance_no_longer_knows_is_freed(home):
    with dg.DagsterInstance.get() as instance:
        storage = instance.event_log_storage
        storage.initialize_concurrency_limit_to_default(POOL)
        assert storage.claim_concurrency_slot(POOL, "gone-run", "write").is_claimed
        assert pool_claims(instance) == [SlotClaim(POOL, "gone-run", "write", True, pool_claims(instance)[0].since)]
        assert free_dead_runs_slots(instance) == ["gone-run"]
        assert pool_claims(instance) == []


def test_a_wait_is_said_only_when_another_run_holds_the_slot():
    """A step queued behind a step of its own run (a Celery bench's report steps) is the pool at work; one
    behind another run's step is what the notice is for; a slot just freed (no holder) is neither."""
    from datetime import UTC, datetime

    from aerorl_pipeline.slot_wait import Waiting

    at = datetime(2026, 11, 29, 1, 0, 0, tzinfo=UTC)
    waiting = SlotClaim("duckdb_writer", "run-a", "benchmark_report_no_row_drop", False, at)
    own = SlotClaim("duckdb_writer", "run-a", "benchmark_report", True, at)
    other = SlotClaim("duckdb_writer", "run-b", "benchmark_report", True, at)
    assert [Waiting(waiting, 1, holders).blocked_by_another_run
            for holders in ((own,), (other,), (own, other), ())] == [False, True, True, False]


def test_a_waits_length_is_read_from_the_claims_record(monkeypatch):
    """However seldom the main thread looks, the wait is as long as the instance's record of the claim says."""
    from datetime import UTC, datetime

    from aerorl_pipeline.slot_wait import claimed_s_ago

    monkeypatch.setattr(slot_wait_module.time, "time", lambda: datetime(2026, 11, 29, 1, 0, 7, tzinfo=UTC).timestamp())
    made = SlotClaim("duckdb_writer", "run-a", "benchmark_report", False, datetime(2026, 11, 29, 1, 0, 0, tzinfo=UTC))
    assert claimed_s_ago(made) == 7.0
    assert claimed_s_ago(SlotClaim("duckdb_writer", "run-a", "benchmark_report", True, None)) == 0.0


def test_a_slot_assigned_to_a_dead_runs_step_that_never_claimed_it_is_freed(home):
    """A run killed after Dagster assigned its step a slot and before the step claimed it leaves an assignment
    that counts against the pool's limit with no slot claimed: every later step waited on, "held by nobody" (a
    chaos run's bench). It is the dead run's hold, named and freed like a claimed slot."""
    from dagster._core.storage.event_log.schema import ConcurrencySlotsTable

    with dg.DagsterInstance.get() as instance:
        storage = instance.event_log_storage
        storage.initialize_concurrency_limit_to_default(POOL)
        assert storage.claim_concurrency_slot(POOL, "gone-run", "write").is_claimed
        with storage.index_connection() as conn:  # the killed process's state: assigned, its slot not claimed
            conn.execute(ConcurrencySlotsTable.update().where(ConcurrencySlotsTable.c.run_id == "gone-run")
                         .values(run_id=None, step_key=None))
        info = storage.get_concurrency_info(POOL)
        assert (info.active_slot_count, [p.run_id for p in info.pending_steps]) == (0, ["gone-run"])
        assert not storage.claim_concurrency_slot(POOL, "next-run", "write").is_claimed  # what blocked the bench
        assert [(c.run_id, c.holding) for c in pool_claims(instance)] == [("gone-run", True), ("next-run", False)]
        assert free_dead_runs_slots(instance) == ["gone-run", "next-run"]  # neither is a run of this instance
        assert pool_claims(instance) == []
        assert storage.claim_concurrency_slot(POOL, "next-run", "write").is_claimed  # the pool is free again
