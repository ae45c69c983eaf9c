"""SIGINT / SIGTERM to `aerorl bench` and `aerorl eval`: a stop at the next safe point, one line, 130 / 143.

A real signal to this process while the command's job runs in its worker thread: the command's
handler asks for a stop (``aerorl_ops.stop``), and the work stops after the partition or setting in
hand. (`aerorl train` is stopped by SIGTERM from outside in tests/reliability/test_train_process.py.)
"""

from __future__ import annotations

import os
import signal
import time

import duckdb

import aerorl_pipeline.bench as bench
from aerorl_ops.stop import clear_stop, stop_requested
from aerorl_pipeline import cli


def signal_this_process(signum: int) -> None:
    """Send ``signum`` from the job's worker thread and wait until the main thread's handler has taken it
    (a person's signal arrives whenever it does; the test's must land before the next safe point)."""
    os.kill(os.getpid(), signum)
    deadline = time.monotonic() + 10
    while stop_requested() is None and time.monotonic() < deadline:
        time.sleep(0.01)


def config_file(folder, model_dir) -> str:
    (folder / "bench.toml").write_text(f"""
[benchmark]
batch_sizes = [1, 2]

[models.tiny]
source = "{model_dir}"

[datasets.docvqa]
kind = "docvqa"
limit = 2

[eval]
model = "tiny"
baseline = "tiny"
""")
    return str(folder / "bench.toml")


def test_sigint_stops_the_benchmark_after_the_partition_in_hand(isolated_commands, tiny_model_dir, tmp_path,
                                                                monkeypatch, capsys):
    real_console_job = bench.console_job

    class SignalledAfterEachRun:
        def __init__(self, job):
            self.job = job

        def execute_in_process(self, **kwargs):
            result = self.job.execute_in_process(**kwargs)
            if kwargs.get("partition_key") is not None:
                signal_this_process(signal.SIGINT)  # Ctrl-C while the first partition's run ends
            return result
    monkeypatch.setattr(bench, "console_job", lambda job: SignalledAfterEachRun(real_console_job(job)))
    try:
        code = cli.main(["bench", "--config", config_file(tmp_path, tiny_model_dir), "--run-id", "stopped",
                         "--max-new-tokens", "2"])
    finally:
        clear_stop()
    err = capsys.readouterr().err
    assert code == 130, err
    assert "aerorl: SIGINT received: stopping after the step in hand (send it again to stop at once)" in err
    assert err.rstrip().endswith("aerorl: interrupted after partition 1 of 2 (benchmark run stopped): its finished "
                                 "partitions are in the report; rerun the command for every partition")
    with duckdb.connect(str(isolated_commands.duckdb_path), read_only=True) as conn:
        sizes = conn.execute("SELECT DISTINCT batch_size FROM generations WHERE run_id = 'stopped'").fetchall()
    assert sizes == [(1,)]  # the first partition, whole; the second never started


def test_sigterm_stops_an_eval_between_its_settings(isolated_commands, tiny_model_dir, tmp_path, monkeypatch, capsys):
    import aerorl_ops.eval_runner.model_vs_baseline as model_vs_baseline

    real_evaluate_model = model_vs_baseline.evaluate_model

    def signalled(*args, on_setting, **kwargs):
        def after(setting, wall_s):
            signal_this_process(signal.SIGTERM)
            on_setting(setting, wall_s)
        return real_evaluate_model(*args, on_setting=after, **kwargs)
    monkeypatch.setattr(model_vs_baseline, "evaluate_model", signalled)
    database = tmp_path / "eval.duckdb"
    try:
        code = cli.main(["eval", "--config", config_file(tmp_path, tiny_model_dir), "--dataset", "docvqa", "--n", "2",
                         "--samples", "2", "--k", "2", "--database", str(database)])
    finally:
        clear_stop()
    err = capsys.readouterr().err
    assert code == 143
    assert err.rstrip().endswith("aerorl: interrupted after the model's high_temp_pass2 setting; an eval stores "
                                 "its rows when it ends: run the same command again")
    assert "Traceback" not in err
