"""How long `aerorl train` takes to its first RL step and `aerorl bench` to its first partition, on the embedded
default (the shipped config's settings), and what a killed training run pays to get back to work (issue 38).

Each command runs as a process of its own in a workdir of its own (``scripts/isolated_aerorl.py``), once the
workdir holds the built model and cached rows (a first `aerorl bench` fills it, unmeasured). Its progress bars
on stderr say when it got where; the figures are the seconds from the start, wall and CPU (user + system of
the command and every process it started, which depends far less than wall time on what else runs):

- ``train``: a new run (``--run-name``) to its first training step and to its first RL step, where it is
  SIGKILLed; then the same command again (the restart of a killed run) to the first step beyond the last one
  the killed start did: what each kill costs a run before it makes progress again;
- ``bench``: to the first partition's start and end (the rows refreshed first, as every `aerorl bench` does),
  and with ``--skip-rows``, where it is SIGKILLed; then the same command again to one partition more than the
  killed start finished.

    python benchmarks/bench_startup.py [--workdir W] [--baseline PATH]

``--baseline`` measures another checkout of the project first (an older commit: ``git archive <commit> | tar -x
-C PATH``; this script copies ``scripts/isolated_aerorl.py`` into it when it lacks one), then this one, each in
a workdir of its own, and prints each figure of both with this checkout's CPU seconds as a ratio of the
baseline's.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER = Path("scripts") / "isolated_aerorl.py"
TIMEOUT_S = 1200.0


@dataclass
class Watch:
    """One command's process, what it printed on stderr so far, and when each milestone was first seen."""

    popen: subprocess.Popen
    started: float
    stderr: str = ""
    seen: dict[str, tuple[float, float]] = field(default_factory=dict)  # milestone: (wall s, CPU s)

    def cpu_s(self) -> float:
        try:
            processes = [psutil.Process(self.popen.pid)]
            processes += processes[0].children(recursive=True)
        except psutil.Error:
            return float("nan")
        total = 0.0
        for process in processes:
            try:
                times = process.cpu_times()
                total += times.user + times.system + times.children_user + times.children_system
            except psutil.Error:
                continue
        return total

    def note(self, milestone: str) -> None:
        if milestone not in self.seen:
            self.seen[milestone] = (time.monotonic() - self.started, self.cpu_s())


def start(checkout: Path, workdir: Path, argv: list[str]) -> Watch:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    popen = subprocess.Popen([sys.executable, str(checkout / LAUNCHER), "--workdir", str(workdir), "--", *argv],
                             cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.set_blocking(popen.stderr.fileno(), False)
    return Watch(popen, time.monotonic())


def follow(watch: Watch, milestones: dict[str, re.Pattern | Callable[[str], bool]], stop_at: str | None = None
           ) -> Watch:
    """Read the command's stderr until it exits (or ``stop_at`` is seen: then SIGKILL it), noting milestones (a
    pattern found in what it printed, or a test of it)."""
    deadline = watch.started + TIMEOUT_S
    while time.monotonic() < deadline:
        chunk = watch.popen.stderr.read()
        if chunk:
            watch.stderr += chunk.decode(errors="replace")
            for name, test in milestones.items():
                if name not in watch.seen and (test.search(watch.stderr) if isinstance(test, re.Pattern)
                                               else test(watch.stderr)):
                    watch.note(name)
        if stop_at is not None and stop_at in watch.seen:
            watch.popen.send_signal(signal.SIGKILL)
            watch.popen.wait()
            return watch
        if watch.popen.poll() is not None:
            watch.note("exit")
            return watch
        time.sleep(0.05)
    watch.popen.kill()
    raise SystemExit(f"no end after {TIMEOUT_S:g} s:\n{watch.stderr[-2000:]}")


TRAIN_MILESTONES = {"first step": re.compile(r"\| 1/\d+ \["),
                    "first RL step": re.compile(r"phase=(?!warmup)\w+")}


STEP = re.compile(r"\| (\d+)/\d+ \[")


def train_figures(checkout: Path, workdir: Path) -> dict[str, tuple[float, float]]:
    argv = ["train", "--run-name", f"startup-{int(time.time())}"]
    first = follow(start(checkout, workdir, argv), TRAIN_MILESTONES, stop_at="first RL step")
    killed_after = max(int(step) for step in STEP.findall(first.stderr))
    next_step = {"a step beyond the kill": re.compile(rf"\| {killed_after + 1}/\d+ \[")}
    restart = follow(start(checkout, workdir, argv), next_step, stop_at="a step beyond the kill")
    return {f"new run: {name}": value for name, value in first.seen.items()} | {
        f"its restart (killed after step {killed_after}): {name}": value for name, value in restart.seen.items()}


BENCH_MILESTONES = {"first partition starts": re.compile(r"benchmark partitions:\s+0%"),
                    "first partition done": re.compile(r"benchmark partitions:\s+\d+%\|[^|]*\| 1/\d+")}
PARTITIONS = re.compile(r"benchmark partitions:[^|]*\|[^|]*\| (\d+)/(\d+)")


def beyond(planned: int, done: int) -> Callable[[str], bool]:
    """Whether a restart of a bench of ``planned`` partitions, killed after ``done``, has finished one more: its
    bar counts those it runs (all of them again, or those its benchmark run has not finished)."""
    def test(stderr: str) -> bool:
        bars = PARTITIONS.findall(stderr)
        return bool(bars) and planned - int(bars[-1][1]) + int(bars[-1][0]) > done
    return test


def bench_figures(checkout: Path, workdir: Path) -> dict[str, tuple[float, float]]:
    """A new benchmark run (each its own: none has a partition done) to its first partition, with the rows
    refreshed, then with ``--skip-rows``; that one is killed there and restarted to one partition more."""
    figures = {}
    for index, flags in enumerate(([], ["--skip-rows"])):
        argv = ["bench", "--run-id", f"startup-{time.time():.0f}-{index}", *flags]
        watch = follow(start(checkout, workdir, argv), BENCH_MILESTONES, stop_at="first partition done")
        figures |= {f"bench {' '.join(flags) or '(rows refreshed)'}: {name}": value
                    for name, value in watch.seen.items()}
    done, planned = map(int, PARTITIONS.findall(watch.stderr)[-1])
    restart = follow(start(checkout, workdir, argv), {"a partition beyond the kill": beyond(planned, done)},
                     stop_at="a partition beyond the kill")
    return figures | {f"its restart (killed after {done} of {planned} partitions): {name}": value
                      for name, value in restart.seen.items()}


def measure(checkout: Path, workdir: Path, models: Path | None) -> dict[str, tuple[float, float]]:
    """Every figure of ``checkout`` in ``workdir`` (``models``: a built models folder to copy in, else built)."""
    if not (checkout / LAUNCHER).exists():
        shutil.copy(ROOT / LAUNCHER, checkout / LAUNCHER)
    if models is not None and not (workdir / "data" / "models").exists():
        shutil.copytree(models, workdir / "data" / "models")
    prepared = follow(start(checkout, workdir, ["bench", "--run-id", "prepare"]), {})
    if prepared.popen.returncode != 0:
        raise SystemExit(f"the preparing bench of {checkout} failed:\n{prepared.stderr[-2000:]}")
    return bench_figures(checkout, workdir) | train_figures(checkout, workdir)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None, help="default: a new temporary folder")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another checkout of the project (an older commit), measured first in the same run")
    args = parser.parse_args()
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="aerorl-startup-"))).resolve()
    checkouts = {"baseline": args.baseline.resolve()} if args.baseline else {}
    checkouts["this checkout"] = ROOT
    load = os.getloadavg()[0]
    figures = {}
    for name, checkout in checkouts.items():
        models = workdir / "baseline" / "data" / "models" if figures else None  # built once
        figures[name] = measure(checkout, workdir / name.replace(" ", "-"), models)
    print(f"workdir {workdir}, load average {load:.1f} -> {os.getloadavg()[0]:.1f}; seconds from the command's "
          f"start, wall / CPU ({' | '.join(checkouts)})")
    for milestone, (wall, cpu) in figures["this checkout"].items():
        before = figures.get("baseline", {}).get(milestone)
        against = f"{before[0]:7.1f} / {before[1]:5.1f} | " if before else ""
        ratio = f"  CPU x{cpu / before[1]:.2f}" if before else ""
        print(f"{milestone:64s} {against}{wall:7.1f} / {cpu:5.1f}{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
