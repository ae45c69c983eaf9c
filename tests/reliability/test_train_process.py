"""Two real `aerorl train` processes of one run, and a real SIGTERM (issue 31, items 3, 6, 7, 9).

One run trained by a process of its own (``command_driver.py``): a second `aerorl train` of the same run
is refused while it trains, naming its pid; SIGTERM stops it after the step in hand, with that step's
checkpoint, and one line that says where and how to go on (exit 143); the same command then resumes from that
step, saying so, and a run
that has finished says so at once, loading no model.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from aerorl_pipeline import cli

DRIVER = Path(__file__).with_name("command_driver.py")
RUN = "two-procs"
TRAIN = ["train", "--run-name", RUN, "--warmup-steps", "4", "--warmup-batch-size", "2", "--steps", "6",
         "--prompts-per-step", "2", "--group-size", "2", "--eval-size", "4", "--eval-interval", "100",
         "--checkpoint-interval", "2", "--no-control", "--swap-check-type", "", "--sampled-eval-size", "0",
         "--train-limit", "16"]
WAIT_S = 300.0


def wait_for(condition, what: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if process.poll() is not None:
            raise AssertionError(f"the trainer exited ({process.returncode}) before {what}: "
                                 f"{process.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} in {WAIT_S} s")
        time.sleep(0.2)


@pytest.mark.slow
def test_one_process_per_run_a_clean_stop_on_sigterm_then_resume_and_finish(isolated_commands, models_dir, tmp_path,
                                                                            monkeypatch, capsys):
    dagster_env, home = isolated_commands, tmp_path / "dagster_home"
    run_dir = models_dir.parent / "checkpoints" / RUN
    lock = models_dir.parent / "checkpoints" / f"{RUN}.lock"
    driver = [sys.executable, str(DRIVER), "--root", str(dagster_env.root), "--models-dir", str(models_dir),
              "--hold-at-checkpoint", "step-6"]  # it waits there for the signal: the run cannot end first
    trainer = subprocess.Popen([*driver, "--", *TRAIN], env={**os.environ, "DAGSTER_HOME": str(home)},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: lock.exists() and lock.read_text() == str(trainer.pid), "lock holding its pid", trainer)
        assert cli.main(TRAIN) == 2  # the same run, while the first process trains it
        assert capsys.readouterr().err == (f"aerorl: configuration error: run {RUN} is being trained by pid "
                                           f"{trainer.pid} (lock {lock}): wait for it to end, or stop that "
                                           "process first\n")
        wait_for(lambda: (run_dir / "step-6").is_dir(), "checkpoint step-6", trainer)  # in the RL phase
        trainer.send_signal(signal.SIGTERM)
        out, err = trainer.communicate(timeout=WAIT_S)
    finally:
        if trainer.poll() is None:
            trainer.kill()
    assert trainer.returncode == 143, err[-3000:]
    lines = [line for line in err.replace("\r", "\n").splitlines() if line.startswith("aerorl:")]
    assert lines[0] == "aerorl: SIGTERM received: stopping after the step in hand (send it again to stop at once)"
    stopped = int(lines[-1].split("interrupted after step ")[1].split()[0])
    assert 6 <= stopped < 10
    newest = stopped  # the stop writes its step's checkpoint: the rerun goes on from there
    assert lines[-1] == (f"aerorl: interrupted after step {stopped} of 10; resume with the same command "
                         f"(checkpoint step-{newest})")
    assert "Traceback" not in err and "DagsterExecutionInterruptedError" not in err
    assert lock.read_text() == ""  # let go: the next command takes it without a word
    with duckdb.connect(str(dagster_env.duckdb_path), read_only=True) as conn:
        assert conn.execute("SELECT max(step) FROM training_steps WHERE run_id = ?", [RUN]).fetchone()[0] == stopped

    assert cli.main(TRAIN) == 0  # the same command: resumes
    out = capsys.readouterr().out
    assert f"resuming run {RUN} from step-{newest} (checkpoint {run_dir / f'step-{newest}'})\n" in out
    with duckdb.connect(str(dagster_env.duckdb_path), read_only=True) as conn:
        steps, resumed = conn.execute("SELECT (SELECT count(*) FROM training_steps WHERE run_id = ?), "
                                      "resumed_from_step FROM training_runs WHERE run_id = ?", [RUN, RUN]).fetchone()
    assert (steps, resumed) == (10, newest)

    def nothing_more(*args, **kwargs):
        raise AssertionError("a finished run checked its inputs or started a job")
    monkeypatch.setattr("aerorl_ops.rl.run.inputs.check_training_inputs", nothing_more)
    monkeypatch.setattr("aerorl_pipeline.instance.local_instance", nothing_more)
    started = time.monotonic()
    assert cli.main(TRAIN) == 0
    assert time.monotonic() - started < 10
    out = capsys.readouterr().out
    assert out.startswith(f"run {RUN} finished at ") and out.endswith(
        ": nothing to train (use --no-resume to train it again)\n")
