"""A killed run never blocks the next one (issue 38, items 1 and 2): real `aerorl bench` processes on one
Dagster home, the first held in its ``benchmark_report`` step (``command_driver.py --hold-in-report``) while
it holds the ``duckdb_writer`` pool slot.

- SIGKILL the holder, then the next bench frees the dead run's slot as it opens the instance, saying so, and
  finishes;
- a bench already waiting when the holder is killed frees the slot itself and finishes, after one line naming
  the holder's run and step;
- SIGTERM to a waiting bench stops it at once (143), its run canceled and nothing of it claimed;
- a wait over ``[executor] pool_wait_limit_s`` ends with one line naming the holder (exit 1).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from aerorl_pipeline.pool_slots import pool_claims

DRIVER = Path(__file__).with_name("command_driver.py")
WAIT_S = 300.0
POOL = "duckdb_writer"


def config_file(folder: Path, model_dir: Path, wait_limit_s: float = 0) -> Path:
    path = folder / f"bench-{wait_limit_s:g}.toml"
    path.write_text(f"""
[benchmark]
batch_sizes = [1]

[models.tiny]
source = "{model_dir}"

[datasets.docvqa]
kind = "docvqa"
limit = 2

[executor]
pool_wait_limit_s = {wait_limit_s}
""")
    return path


class Benches:
    """`aerorl bench` processes of one test, each on the test's Dagster home and folders."""

    def __init__(self, root: Path, models_dir: Path, home: Path, config: Path) -> None:
        self.root, self.models_dir, self.home, self.config = root, models_dir, home, config
        self.started: list[subprocess.Popen] = []

    def start(self, run_id: str, *flags: str, config: Path | None = None) -> subprocess.Popen:
        command = [sys.executable, str(DRIVER), "--root", str(self.root), "--models-dir", str(self.models_dir),
                   *flags, "--", "bench", "--config", str(config or self.config), "--run-id", run_id,
                   "--max-new-tokens", "2", "--skip-rows", "--stale-ok"]
        process = subprocess.Popen(command, env={**os.environ, "DAGSTER_HOME": str(self.home)},
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.started.append(process)
        return process

    def kill_all(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.kill()
            process.communicate()


def wait_until(condition, what: str, *processes: subprocess.Popen):
    deadline = time.monotonic() + WAIT_S
    while True:
        found = condition()
        if found:
            return found
        for process in processes:
            if process.poll() is not None:
                raise AssertionError(f"a bench exited ({process.returncode}) before {what}: {process.stderr.read()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} in {WAIT_S} s")
        time.sleep(0.2)


def holding(instance: dg.DagsterInstance):
    """The benchmark_report step holding the pool's slot, once one does."""
    return next((c for c in pool_claims(instance) if c.pool == POOL and c.holding and c.step_key == "benchmark_report"),
                None)


def waiting(instance: dg.DagsterInstance, holder_run: str):
    """A step of another run waiting for the pool, once one does."""
    return next((c for c in pool_claims(instance) if c.pool == POOL and not c.holding and c.run_id != holder_run),
                None)


def rows_of(database: Path, run_id: str) -> int:
    with duckdb.connect(str(database), read_only=True) as conn:
        return conn.execute("SELECT count(*) FROM generations WHERE run_id = ?", [run_id]).fetchone()[0]


@pytest.fixture
def benches(isolated_commands, models_dir, tiny_model_dir, tmp_path):
    """The test's benches; the rows are materialized once first (each bench then reads them: --skip-rows)."""
    from aerorl_pipeline import cli

    home = tmp_path / "dagster_home"
    config = config_file(tmp_path, tiny_model_dir)
    assert cli.main(["bench", "--config", str(config), "--run-id", "first", "--max-new-tokens", "2"]) == 0
    made = Benches(isolated_commands.root, models_dir, home, config)
    yield made
    made.kill_all()


def killed_holder(benches: Benches, instance: dg.DagsterInstance) -> str:
    """A bench held in its report step, SIGKILLed while it holds the slot: its Dagster run id."""
    holder = benches.start("killed", "--hold-in-report")
    claim = wait_until(lambda: holding(instance), "a held report slot", holder)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert holding(instance) is not None  # what the dead process left behind
    return claim.run_id


@pytest.mark.slow
def test_the_next_bench_frees_a_killed_runs_slot_and_finishes(benches, isolated_commands):
    with dg.DagsterInstance.get() as instance:
        dead_run = killed_holder(benches, instance)
        after = benches.start("after")
        out, err = after.communicate(timeout=WAIT_S)
        assert after.returncode == 0, err
        assert pool_claims(instance) == []
        assert instance.get_run_by_id(dead_run).status == dg.DagsterRunStatus.FAILURE
    assert f"freed the duckdb_writer slot of step benchmark_report of run {dead_run} (FAILURE)" in err
    assert rows_of(isolated_commands.duckdb_path, "after") == 2
    assert rows_of(isolated_commands.duckdb_path, "killed") == 0


@pytest.mark.slow
def test_a_waiting_bench_names_the_holder_frees_it_once_killed_and_finishes(benches, isolated_commands):
    with dg.DagsterInstance.get() as instance:
        holder = benches.start("holder", "--hold-in-report")
        held = wait_until(lambda: holding(instance), "a held report slot", holder)
        waiter = benches.start("waiter")
        wait_until(lambda: waiting(instance, held.run_id), "a waiting step", waiter)
        time.sleep(8)  # past the notice
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        out, err = waiter.communicate(timeout=WAIT_S)
        assert waiter.returncode == 0, err
        assert pool_claims(instance) == []
    notices = [line for line in err.splitlines() if "for a duckdb_writer slot, held by" in line]
    assert len(notices) == 1, err
    assert f"held by run {held.run_id} step benchmark_report since " in notices[0]
    assert notices[0].endswith("(its process is alive; waiting on; Ctrl-C stops)")
    assert f"freed the duckdb_writer slot of step benchmark_report of run {held.run_id} (FAILURE)" in err
    assert rows_of(isolated_commands.duckdb_path, "waiter") == 2


@pytest.mark.slow
def test_sigterm_stops_a_waiting_bench_at_once_and_leaves_nothing_claimed(benches):
    with dg.DagsterInstance.get() as instance:
        holder = benches.start("holder", "--hold-in-report")
        held = wait_until(lambda: holding(instance), "a held report slot", holder)
        waiter = benches.start("waiter")
        waited = wait_until(lambda: waiting(instance, held.run_id), "a waiting step", waiter)
        signalled = time.monotonic()
        waiter.send_signal(signal.SIGTERM)
        out, err = waiter.communicate(timeout=60)
        stopped_s = time.monotonic() - signalled
        assert waiter.returncode == 143, err
        assert stopped_s < 30, f"took {stopped_s:.0f} s to stop"  # a bound on a hang, not a timing claim
        assert [c for c in pool_claims(instance) if c.run_id == waited.run_id] == []
        assert instance.get_run_by_id(waited.run_id).status == dg.DagsterRunStatus.CANCELED
        assert holding(instance).run_id == held.run_id  # the live holder keeps its slot
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"aerorl: stopped while waiting for a pool slot: step benchmark_report of run "
                           f"{waited.run_id} has waited "), err
    assert last.endswith(f"held by run {held.run_id} step benchmark_report since "
                         f"{held.since:%H:%M:%S} UTC; nothing is claimed: rerun the command to go on")
    assert "Traceback" not in err


@pytest.mark.slow
def test_a_wait_over_the_limit_ends_with_one_line_naming_the_holder(benches, tiny_model_dir, tmp_path):
    limited = config_file(tmp_path, tiny_model_dir, wait_limit_s=3)
    with dg.DagsterInstance.get() as instance:
        holder = benches.start("holder", "--hold-in-report")
        held = wait_until(lambda: holding(instance), "a held report slot", holder)
        waiter = benches.start("limited", config=limited)
        out, err = waiter.communicate(timeout=WAIT_S)
        assert waiter.returncode == 1, err
        assert holding(instance).run_id == held.run_id
        assert [c for c in pool_claims(instance) if c.run_id != held.run_id] == []
    last = err.strip().splitlines()[-1]
    assert last.startswith("aerorl: step benchmark_report of run "), err
    assert f"for a duckdb_writer slot, held by run {held.run_id} step benchmark_report since " in last
    assert last.endswith("over [executor] pool_wait_limit_s = 3: stop that run or raise the limit (0 waits as long "
                         "as the holder's process lives)")
    assert "Traceback" not in err
