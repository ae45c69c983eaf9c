"""What a one-time model build says: lines on stderr and in the build log, a bar, a wait for another builder."""

from __future__ import annotations

import logging
import subprocess
import sys
import time

from aerorl_ops.models.build_progress import BUILD_LOG, build_lock, say, step_bar


def test_a_line_goes_to_the_terminal_and_the_build_log(capsys, caplog):
    with caplog.at_level(logging.INFO, logger=BUILD_LOG.name):
        say("building x (one time)")
    assert capsys.readouterr().err == "building x (one time)\n"
    assert [record.getMessage() for record in caplog.records] == ["building x (one time)"]


def test_the_step_bar_logs_every_nth_step_and_the_last(capsys, caplog):
    with caplog.at_level(logging.INFO, logger=BUILD_LOG.name), step_bar(5, "building x", log_every=2) as advance:
        for _ in range(5):
            advance()
    assert [record.getMessage() for record in caplog.records] == [
        "building x: step 2 of 5", "building x: step 4 of 5", "building x: step 5 of 5"]
    assert "5/5" in capsys.readouterr().err


def test_a_builder_that_waits_for_another_process_says_so(tmp_path, capsys):
    lock_path = tmp_path / ".x.lock"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from filelock import FileLock\n"
        f"with FileLock({str(lock_path)!r}):\n    print('held', flush=True); time.sleep(1.0)")],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    start = time.monotonic()
    with build_lock(lock_path, "x"):
        waited = time.monotonic() - start
    holder.wait()
    assert waited > 0.3  # it held on until the other process let go
    assert capsys.readouterr().err == f"waiting for another process to finish building x (lock {lock_path})\n"


def test_a_free_lock_says_nothing(tmp_path, capsys):
    with build_lock(tmp_path / ".x.lock", "x"):
        pass
    assert capsys.readouterr().err == ""
