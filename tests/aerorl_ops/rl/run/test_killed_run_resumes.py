"""A recorded run killed with SIGKILL mid-RL, then resumed by a new process, ends with exactly the rows
of an uninterrupted run of the same settings; so does one killed right after each of its checkpoints is
written (the warm-up's last step, then an RL step with an evaluation); a finished run rerun trains nothing and
keeps its rows.

Each run is ``killable_run`` in a process of its own (one torch thread), so the kill is a real one."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.aerorl_ops.rl.run.killable_run import RUN_ID, recorded_run

PROJECT_ROOT = Path(__file__).resolve().parents[4]
KILL_AFTER = 5  # the third RL step: after the step-4 checkpoint, before the final one
STEP_COLUMNS = "step, phase, loss, kl, reward_mean, accuracy, skipped, episodes_seen"
EVAL_COLUMNS = "step, phase, accuracy, n, reward_mean"


def start_process(model_dir: Path, run_dir: Path, database: Path, kill_after: int | str | None = None
                  ) -> subprocess.Popen:
    command = [sys.executable, "-m", "tests.aerorl_ops.rl.run.killable_run", str(model_dir), str(run_dir),
               str(database)]
    return subprocess.Popen(command + ([str(kill_after)] if kill_after else []), cwd=PROJECT_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen) -> int:
    _, stderr = process.communicate(timeout=600)
    assert process.returncode in (0, -signal.SIGKILL), stderr
    return process.returncode


def stored(database: Path, table: str, columns: str = "*") -> list[tuple]:
    with duckdb.connect(str(database), read_only=True) as conn:
        order = "" if table == "training_runs" else " ORDER BY step, phase"
        return conn.execute(f"SELECT {columns} FROM {table} WHERE run_id = ?{order}", [RUN_ID]).fetchall()


@pytest.fixture(scope="module")
def runs(tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("killed_run")
    killed, whole = (root / "killed", root / "killed.duckdb"), (root / "whole", root / "whole.duckdb")
    uninterrupted = start_process(tiny_model_dir, *whole)  # beside the others: its own folder and database
    codes = [finish(start_process(tiny_model_dir, *killed, kill_after=KILL_AFTER))]
    at_kill = {"steps": stored(killed[1], "training_steps", "step"), "evals": stored(killed[1], "training_evals",
               "phase, step"), "run": stored(killed[1], "training_runs", "finished_at"),
               "checkpoints": sorted(p.name for p in killed[0].iterdir())}
    codes += [finish(start_process(tiny_model_dir, *killed)), finish(uninterrupted)]
    return codes, at_kill, killed, whole


@pytest.fixture(scope="module")
def killed_after_checkpoints(runs, tiny_model_dir, tmp_path_factory):
    """The run killed right after its step-2 checkpoint (the warm-up's end), then after its step-4 one (an RL
    evaluation's step), then resumed to the end; the exit codes, its folder and database, the whole run's."""
    root = tmp_path_factory.mktemp("killed_after_checkpoints")
    killed = (root / "killed", root / "killed.duckdb")
    codes = [finish(start_process(tiny_model_dir, *killed, kill_after=f"checkpoint-{step}")) for step in (2, 4)]
    codes.append(finish(start_process(tiny_model_dir, *killed)))
    return codes, killed, runs[3]


def test_the_kill_keeps_every_row_written_before_it(runs):
    codes, at_kill, _, _ = runs
    assert codes == [-signal.SIGKILL, 0, 0]
    assert at_kill["steps"] == [(1,), (2,), (3,), (4,), (5,)]  # step 5 stored, its process killed right after
    assert at_kill["evals"] == [("base", 0), ("no_image_prior", 0), ("warmup", 2), ("rl", 4)]
    assert at_kill["run"] == [(None,)]  # started, not finished
    assert at_kill["checkpoints"] == ["step-2", "step-4", "warmup"]  # no torn step-5, no temporary folder left


def test_the_resumed_run_has_the_rows_of_an_uninterrupted_one(runs):
    _, _, (_, killed_db), (_, whole_db) = runs
    steps = stored(killed_db, "training_steps", STEP_COLUMNS)
    assert [row[0] for row in steps] == [1, 2, 3, 4, 5]  # no gap, no duplicate (step 5 rerun in place)
    assert steps == stored(whole_db, "training_steps", STEP_COLUMNS)  # the same losses and KL
    assert steps[2][3] == 0 and min(row[3] for row in steps[3:]) > 0  # the policy left the RL start (reference)
    evals = stored(killed_db, "training_evals", EVAL_COLUMNS)
    assert [(row[1], row[0]) for row in evals] == [("base", 0), ("no_image_prior", 0), ("warmup", 2), ("rl", 4),
                                                   ("final", 5)]
    assert evals == stored(whole_db, "training_evals", EVAL_COLUMNS)
    assert stored(killed_db, "training_eval_types") == stored(whole_db, "training_eval_types")
    (resumed_from, steps_total, finished), = stored(killed_db, "training_runs", "resumed_from_step, steps, finished_at")
    assert (resumed_from, steps_total) == (4, 5) and finished is not None
    assert stored(whole_db, "training_runs", "resumed_from_step") == [(0,)]


def test_rerunning_a_finished_run_trains_nothing_and_keeps_its_rows(runs, tiny_model_dir, caplog):
    _, _, (run_dir, database), (_, whole_db) = runs
    tables = ("training_runs", "training_steps", "training_evals", "training_eval_types")
    before = {table: stored(database, table) for table in tables}
    checkpoints = sorted((p.name, p.stat().st_mtime_ns) for p in run_dir.iterdir())

    def refuse(reporter):
        raise AssertionError("a finished run was trained again")

    with caplog.at_level(logging.INFO, logger="killable_run"):
        run = recorded_run(str(tiny_model_dir), run_dir, database, train=refuse)
    assert {table: stored(database, table) for table in tables} == before
    assert sorted((p.name, p.stat().st_mtime_ns) for p in run_dir.iterdir()) == checkpoints
    assert len(caplog.records) == 1
    assert caplog.records[0].getMessage().startswith(f"run {RUN_ID} finished at ")
    assert "(5 of 5 steps recorded); nothing to train" in caplog.records[0].getMessage()
    # the figures are the stored ones, the killed process's warm-up evaluation included
    accuracy = {phase: value for phase, value in stored(whole_db, "training_evals", "phase, accuracy")}
    assert (run.accuracy("warmup"), run.accuracy("final")) == (accuracy["warmup"], accuracy["final"])
    assert list(run.evaluations["phase"]) == ["no_image_prior", "base", "warmup", "rl", "final"]


def test_a_run_killed_right_after_each_checkpoint_resumes_with_every_row(killed_after_checkpoints):
    codes, (run_dir, database), (_, whole_db) = killed_after_checkpoints
    assert codes == [-signal.SIGKILL, -signal.SIGKILL, 0]
    # each checkpoint is written after its step's evaluation (and, at the warm-up's end, after the reference's
    # warmup/ folder): a kill right after it loses neither
    assert stored(database, "training_evals", EVAL_COLUMNS) == stored(whole_db, "training_evals", EVAL_COLUMNS)
    assert stored(database, "training_eval_types") == stored(whole_db, "training_eval_types")
    assert stored(database, "training_steps", STEP_COLUMNS) == stored(whole_db, "training_steps", STEP_COLUMNS)
    assert stored(database, "training_runs", "resumed_from_step") == [(4,)]
    assert sorted(p.name for p in run_dir.iterdir()) == ["step-2", "step-4", "step-5", "warmup"]
