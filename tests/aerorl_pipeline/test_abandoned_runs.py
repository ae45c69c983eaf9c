"""A run a killed process left STARTED is marked failed when the local instance is next opened; a run
whose process is alive is left alone."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from aerorl_pipeline.instance import local_instance

HOLDER = """
import time
import dagster as dg

@dg.op
def hold() -> None:
    time.sleep(600)

@dg.job(tags={"holder": "%s"})
def holding() -> None:
    hold()

holding.execute_in_process(instance=dg.DagsterInstance.get())
"""


def start_holder(name: str, home: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", HOLDER % name], env={**os.environ, "DAGSTER_HOME": str(home)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def started_run(instance: dg.DagsterInstance, name: str, timeout_s: float = 180.0) -> dg.DagsterRun:
    """The holder's run once it is STARTED (a wait for the child process, not a timing assertion)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"holder": name}, statuses=[dg.DagsterRunStatus.STARTED]))
        if runs:
            return runs[0]
        time.sleep(0.2)
    raise AssertionError(f"the {name} run did not start within {timeout_s} s")


@pytest.fixture
def home(tmp_path: Path, monkeypatch) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


def test_a_killed_run_is_failed_on_the_next_start_and_a_live_one_is_not_touched(home, caplog):
    holders = []
    try:
        with dg.DagsterInstance.get() as instance:  # creates its storage, before two processes share it
            holders.append(killed := start_holder("killed", home))
            killed_run = started_run(instance, "killed")
            holders.append(start_holder("alive", home))
            alive_run = started_run(instance, "alive")
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        with caplog.at_level(logging.WARNING, logger="aerorl_pipeline.pool_slots"), local_instance() as instance:
            assert instance.get_run_by_id(killed_run.run_id).status == dg.DagsterRunStatus.FAILURE
            assert instance.get_run_by_id(alive_run.run_id).status == dg.DagsterRunStatus.STARTED
            failures = instance.all_logs(killed_run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
        expected = (f"run {killed_run.run_id} was STARTED but its process (pid {killed.pid}) is gone: it was killed "
                    "or crashed. Marked failed when the instance was next opened; rerun it to finish its work")
        assert [entry.message for entry in failures] == [expected]
        assert [r.getMessage() for r in caplog.records if r.name == "aerorl_pipeline.pool_slots"] == [expected]
        with local_instance() as instance:  # opened again: nothing more to mark
            assert len(instance.all_logs(killed_run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)) == 1
            assert instance.get_run_by_id(alive_run.run_id).status == dg.DagsterRunStatus.STARTED
    finally:
        for process in holders:
            process.kill()
            process.wait()
