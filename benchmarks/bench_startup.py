"""How long `aerorl train` takes to its first RL step and `aerorl bench` to its first partition, on the embedded
default (the shipped config's settings), and what a killed training run pays to get back to work (issue 38).

Each command runs as a process of its own in a workdir of its own (``scripts/isolated_aerorl.py``), once the
workdir holds the built model and cached rows (a first `aerorl bench` fills it, unmeasured). Its progress bars
on stderr say when it got where; the figures are the seconds from the start, wall and CPU (user + system of
the command and every process it started, which counts the same whatever else runs on the machine):

- ``train``: a new run (``--run-name``) to its first training step and to its first RL step, where it is
  SIGKILLed; then the same command again (the restart of a killed run) to the first step beyond the last one
  the killed start did: what each kill costs a run before it makes progress again;
- ``bench``: to the first partition's start and end (the rows refreshed first, as every `aerorl bench` does),
  and with ``--skip-rows``.

    python benchmarks/bench_startup.py [--workdir W] [--checkout PATH]

``--checkout`` measures another checkout of the project (an older commit: ``git archive <commit> | tar -x -C
PATH``; this script copies ``scripts/isolated_aerorl.py`` into it when it lacks one). The baseline is the same
command's figures on the other checkout, in the same session; the ratios are printed by running it twice.
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


def follow(watch: Watch, milestones: dict[str, re.Pattern], stop_at: str | None = None) -> Watch:
    """Read the command's stderr until it exits (or ``stop_at`` is seen: then SIGKILL it), noting milestones."""
    deadline = watch.started + TIMEOUT_S
    while time.monotonic() < deadline:
        chunk = watch.popen.stderr.read()
        if chunk:
            watch.stderr += chunk.decode(errors="replace")
            for name, pattern in milestones.items():
                if name not in watch.seen and pattern.search(watch.stderr):
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
    beyond = {"a step beyond the kill": re.compile(rf"\| {killed_after + 1}/\d+ \[")}
    restart = follow(start(checkout, workdir, argv), beyond, stop_at="a step beyond the kill")
    return {f"new run: {name}": value for name, value in first.seen.items()} | {
        f"its restart (killed after step {killed_after}): {name}": value for name, value in restart.seen.items()}


BENCH_MILESTONES = {"first partition starts": re.compile(r"benchmark partitions:\s+0%"),
                    "first partition done": re.compile(r"benchmark partitions:\s+\d+%\|[^|]*\| 1/\d+")}


def bench_figures(checkout: Path, workdir: Path) -> dict[str, tuple[float, float]]:
    figures = {}
    for flags in ([], ["--skip-rows"]):
        watch = follow(start(checkout, workdir, ["bench", "--run-id", "startup", *flags]), BENCH_MILESTONES,
                       stop_at="first partition done")
        figures |= {f"bench {' '.join(flags) or '(rows refreshed)'}: {name}": value
                    for name, value in watch.seen.items()}
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None, help="default: a new temporary folder")
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the project checkout to measure")
    args = parser.parse_args()
    checkout = args.checkout.resolve()
    if not (checkout / LAUNCHER).exists():
        shutil.copy(ROOT / LAUNCHER, checkout / LAUNCHER)
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="aerorl-startup-"))).resolve()
    prepared = follow(start(checkout, workdir, ["bench", "--run-id", "prepare"]), {})
    if prepared.popen.returncode != 0:
        raise SystemExit(f"the preparing bench failed:\n{prepared.stderr[-2000:]}")
    load = os.getloadavg()[0]
    figures = bench_figures(checkout, workdir) | train_figures(checkout, workdir)
    print(f"checkout {checkout}, workdir {workdir}, load average {load:.1f} -> {os.getloadavg()[0]:.1f}")
    for name, (wall, cpu) in figures.items():
        print(f"{name:58s} {wall:7.1f} s wall {cpu:7.1f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
