"""One process per training run (``rl.run.lock``): a live holder refuses a second, a dead one's lock is
taken over with a line, and a killed checkpoint write's temporary folders are removed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from aerorl_ops.rl.run.lock import RunInProgress, lock_path, remove_leftovers, run_lock


class Lines:
    def __init__(self) -> None:
        self.info_lines: list[str] = []
        self.warnings: list[str] = []

    def info(self, msg: str) -> None:
        self.info_lines.append(msg)

    def warning(self, msg: str) -> None:
        self.warnings.append(msg)


def test_the_lock_holds_the_pid_while_held_and_nothing_after(tmp_path):
    log = Lines()
    with run_lock(tmp_path, "r", log) as path:
        assert path == tmp_path / "r.lock" and path.read_text() == str(os.getpid())
    assert lock_path(tmp_path, "r").read_text() == "" and log.warnings == []


def test_a_run_held_by_a_live_process_is_refused_naming_its_pid(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom aerorl_ops.rl.run.lock import run_lock\n"
        "class L:\n    info = warning = print\n"
        f"with run_lock({str(tmp_path)!r}, 'r', L()):\n    print('held', flush=True); sys.stdin.read()")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(RunInProgress) as raised, run_lock(tmp_path, "r", Lines()):
            pass
        assert str(raised.value) == (f"run r is being trained by pid {holder.pid} (lock {tmp_path / 'r.lock'}): "
                                     "wait for it to end, or stop that process first")
        with run_lock(tmp_path, "another-run", Lines()):  # other runs are free
            pass
    finally:
        holder.communicate("")
    with run_lock(tmp_path, "r", Lines()):  # and once it is gone, the run is free
        pass


def test_the_lock_of_a_process_that_is_gone_is_taken_over_with_a_line(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    pid = int(gone.stdout)
    lock_path(tmp_path, "r").write_text(str(pid))  # killed: its pid stayed in the file, the kernel freed the lock
    log = Lines()
    with run_lock(tmp_path, "r", log):
        pass
    assert log.warnings == [f"run r: took over the lock of pid {pid}, which is gone ({tmp_path / 'r.lock'})"]


def test_a_killed_checkpoint_write_leaves_nothing_once_the_run_starts_again(tmp_path):
    run_dir = tmp_path / "r"
    for name in ("step-2", "warmup", ".step-4.k2j3x9", ".step-2.old.ab12cd", ".warmup.x1y2z3"):
        (run_dir / name).mkdir(parents=True)
        (run_dir / name / "model.safetensors").write_bytes(b"w")
    log = Lines()
    removed = remove_leftovers(run_dir, "r", log)
    assert [p.name for p in removed] == [".step-2.old.ab12cd", ".step-4.k2j3x9", ".warmup.x1y2z3"]
    assert sorted(p.name for p in run_dir.iterdir()) == ["step-2", "warmup"]
    assert log.warnings == [f"run r: removed {p.name}, a checkpoint write that did not finish ({p})" for p in removed]
    assert remove_leftovers(tmp_path / "no-such-run", "x", log) == []


def test_a_held_out_sample_smaller_than_asked_says_why():
    from aerorl_ops.envs.rejections import RejectedRow
    from aerorl_ops.rl.run.train_and_record import short_held_out_line

    class HeldOut(list):
        name = "shapes"
        rejected: list = []

    short = HeldOut(range(5))
    short.rejected = [RejectedRow("shapes.jsonl", f"shapes.jsonl#line={n}", str(n), "image file not found")
                      for n in (2, 4, 7)]
    assert short_held_out_line("r", 8, short) == (
        "run r: the held-out sample has 5 questions, not the 8 asked: of the rows drawn, 3 rows rejected: "
        "image file not found (3) (stored in rejected_rows)")
    assert short_held_out_line("r", 8, HeldOut(range(6))) == (
        "run r: the held-out sample has 6 questions, not the 8 asked: shapes has no more usable rows")
