"""How much OpenMP's spinning costs ``aerorl bench`` on CPU cores shared with other jobs.

Runs ``aerorl bench --skip-rows`` (the shipped config's partitions, its dataset rows already cached:
run ``aerorl bench`` once first) while ``--busy`` other processes (default 2) multiply matrices with
torch's own default threads beside it, the way other jobs load a shared runner. Each repeat runs the
benchmark once with ``OMP_WAIT_POLICY=PASSIVE`` (idle threads sleep) and once with ``ACTIVE`` (idle
threads spin), alternating which goes first so that drifts in load hit both. ``aerorl`` now sets
PASSIVE itself where the variable is unset (``aerorl_ops.cpu_threads``), so ACTIVE stands for the old
behaviour: libgomp's default spins for a while before it sleeps, and ACTIVE spins throughout, so the
ratio is an upper bound on what the default cost. Each run is stopped after ``--timeout`` seconds and
reported as "> timeout". Prints each wall time, the medians and the ratio ACTIVE / PASSIVE.

    python benchmarks/bench_shared_cores.py                      # the default benchmark, 2 repeats
    python benchmarks/bench_shared_cores.py --repeats 1 --timeout 300 -- --model tiny-qwen2-vl --batch-size 8

Arguments after ``--`` go to ``aerorl bench``. Run it when nothing else loads the machine: the busy
processes are meant to be the only other load.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
POLICIES = ("PASSIVE", "ACTIVE")
OPENMP_VARIABLES = ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")
BUSY_LOOP = "import torch\nx = torch.randn(512, 512)\nwhile True:\n    x @ x\n"
"""Another job: torch matrix products on its own default threads (as many as the machine's cores)."""


class Run(NamedTuple):
    """One timed ``aerorl bench``: its wall seconds, or None when it ran past the timeout."""

    policy: str
    wall_s: float | None


class Median(NamedTuple):
    """The median wall time of one policy; a lower bound when it includes a run stopped at the timeout."""

    value: float
    lower_bound: bool


def start_busy(count: int) -> list[subprocess.Popen]:
    """``count`` busy processes, with the environment's OpenMP settings removed (torch's defaults)."""
    environ = {name: value for name, value in os.environ.items() if name not in OPENMP_VARIABLES}
    return [subprocess.Popen([sys.executable, "-c", BUSY_LOOP], env=environ, start_new_session=True)
            for _ in range(count)]


def stop(process: subprocess.Popen) -> None:
    """Kill ``process`` and whatever it started (its own session)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def timed_bench(policy: str, run_id: str, bench_args: list[str], timeout: float, log: Path) -> Run:
    """``aerorl bench --skip-rows --run-id run_id *bench_args`` under ``OMP_WAIT_POLICY=policy``, its
    output in ``log``; exits with the log's end when the benchmark fails."""
    command = [sys.executable, "-m", "aerorl_pipeline.cli", "bench", "--skip-rows", "--run-id", run_id, *bench_args]
    environ = {**os.environ, "OMP_WAIT_POLICY": policy, "PYTHONUNBUFFERED": "1"}
    with log.open("w") as output:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=ROOT, env=environ, stdout=output, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop(process)
            return Run(policy, None)
        wall_s = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"{' '.join(command[2:])} failed (exit {code}):\n{log.read_text()[-3000:]}")
    return Run(policy, wall_s)


def median(runs: list[Run], timeout: float) -> Median:
    """The median wall time of ``runs``, a timed-out run counted as ``timeout`` (so the median is a lower
    bound when at least half of them timed out)."""
    stopped = sum(run.wall_s is None for run in runs)
    return Median(statistics.median(timeout if run.wall_s is None else run.wall_s for run in runs),
                  2 * stopped >= len(runs))


def ratio_text(active: Median, passive: Median) -> str:
    if active.lower_bound and passive.lower_bound:
        return "unknown (both timed out)"
    prefix = ">" if active.lower_bound else "<" if passive.lower_bound else ""
    return f"{prefix}{active.value / passive.value:.1f}"


def seconds_text(value: float | None, timeout: float, lower_bound: bool = False) -> str:
    return f"> {timeout:.0f} s (timeout)" if value is None else f"{'>= ' if lower_bound else ''}{value:.1f} s"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="arguments after -- go to `aerorl bench`")
    parser.add_argument("--repeats", type=int, default=2, help="runs per policy (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds before a run is stopped and reported as over the timeout (default: %(default)s)")
    parser.add_argument("--busy", type=int, default=2, help="busy torch processes beside the benchmark "
                        "(default: %(default)s)")
    parser.add_argument("bench_args", nargs="*", metavar="-- BENCH_ARGS", help="extra `aerorl bench` arguments")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    print(f"{len(os.sched_getaffinity(0))} CPUs, load average {os.getloadavg()[0]:.2f} at start; {args.busy} busy "
          f"processes; aerorl bench --skip-rows {' '.join(args.bench_args)}", flush=True)
    runs: list[Run] = []
    busy = start_busy(args.busy)
    try:
        with tempfile.TemporaryDirectory(prefix="aerorl-shared-cores-") as scratch:
            for repeat in range(args.repeats):
                for policy in POLICIES if repeat % 2 == 0 else POLICIES[::-1]:
                    run_id = f"shared-cores-{stamp}-{repeat}-{policy.lower()}"
                    run = timed_bench(policy, run_id, args.bench_args, args.timeout, Path(scratch) / f"{run_id}.log")
                    runs.append(run)
                    print(f"repeat {repeat} {policy:7s} {seconds_text(run.wall_s, args.timeout)}", flush=True)
    finally:
        for process in busy:
            stop(process)
    medians = {policy: median([run for run in runs if run.policy == policy], args.timeout) for policy in POLICIES}
    for policy, value in medians.items():
        print(f"median {policy:7s} {seconds_text(value.value, args.timeout, value.lower_bound)}")
    print(f"ACTIVE / PASSIVE: {ratio_text(medians['ACTIVE'], medians['PASSIVE'])} ({args.repeats} repeats each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
