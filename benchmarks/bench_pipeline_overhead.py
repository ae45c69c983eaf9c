"""Does this checkout slow the default ``aerorl bench`` / ``aerorl train`` down? Wall time against an earlier
commit, measured in the same session, alternating.

Each side is a ``git worktree`` of its commit under a temporary folder (its own ``data/``, ``reports/`` and
Dagster home), run with this interpreter (the same installed packages) and the worktree first on
``PYTHONPATH``. Per repeat, before then after (alternating, so load drifts hit both): ``aerorl bench``
(every partition of the shipped config; the embedded model built on first use on both sides), and with
``--train`` the default ``aerorl train`` (warm-up, GRPO, evaluations and the supervised control; each
under a run name of its own, so every repeat trains from scratch instead of finding its run finished).
Prints each wall time, the medians and the ratio after / before.

    python benchmarks/bench_pipeline_overhead.py --before 334718b --repeats 2 --train
    python benchmarks/bench_pipeline_overhead.py --before 334718b --bench-model tiny-qwen2-vl   # same partitions
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def worktree(rev: str, folder: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(folder), rev], check=True)
    return folder


def timed(checkout: Path, argv: list[str], home: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(checkout), "DAGSTER_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    home.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "aerorl_pipeline.cli", *argv], cwd=checkout, env=env,
                            capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} in {checkout} failed:\n{result.stderr[-3000:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the earlier commit")
    parser.add_argument("--after", default="HEAD")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--train", action="store_true", help="also time the default aerorl train")
    parser.add_argument("--skip-bench", action="store_true", help="time aerorl train only")
    parser.add_argument("--bench-model", action="append", default=[],
                        help="time `aerorl bench --model KEY` (repeatable): the same partitions on both sides when "
                             "the shipped config gained a model between them")
    args = parser.parse_args()
    bench = ["bench", *(arg for key in args.bench_model for arg in ("--model", key))]
    commands = {**({} if args.skip_bench else {"bench": bench}), **({"train": ["train"]} if args.train else {})}
    with tempfile.TemporaryDirectory(prefix="aerorl-overhead-") as scratch:
        scratch_dir = Path(scratch)
        sides = {"before": worktree(args.before, scratch_dir / "before"),
                 "after": worktree(args.after, scratch_dir / "after")}
        try:
            times: dict[tuple[str, str], list[float]] = {}
            for repeat in range(args.repeats):
                for name, argv in commands.items():
                    for side, checkout in sides.items():
                        named = [*argv, "--run-name", f"overhead-{repeat}"] if name == "train" else argv
                        wall = timed(checkout, named, scratch_dir / f"home-{side}-{name}-{repeat}")
                        times.setdefault((name, side), []).append(wall)
                        print(f"repeat {repeat} {name:5s} {side:6s} {wall:7.1f} s", flush=True)
            for name in commands:
                before, after = (statistics.median(times[name, side]) for side in ("before", "after"))
                print(f"{name}: median before {before:.1f} s, after {after:.1f} s, after / before {after / before:.3f} "
                      f"({args.repeats} repeats each)")
        finally:
            for checkout in sides.values():
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(checkout)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
