"""What a checkout computes, with its measurements left out: a refactor must leave this unchanged.

Runs, in this checkout (``PROJECT_ROOT``), at one torch thread and fixed seeds:
1. ``aerorl bench --run-id fingerprint`` on the shipped config (every partition, the report);
2. a short ``aerorl train`` (4 warm-up + 4 RL steps, 32 held-out questions, no control, no sampled
   evaluations) under the run name ``fingerprint-train``, started over (``--no-resume``);

then writes the behaviour rows (``aerorl_ops.storage.behaviour_rows``) of the benchmark's report tables
and the run's ``training_steps`` / ``training_evals`` rows, timing columns left out, as JSON.

    python scripts/behaviour_fingerprint.py before.json            # on the old commit (a git worktree)
    python scripts/behaviour_fingerprint.py after.json
    python scripts/behaviour_fingerprint.py --compare before.json after.json   # exit 1 on any changed value

A table whose newer rows add columns at their end, or rows of their own, compares on its older rows and
columns (see ``verdict``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]
BENCH_RUN = "fingerprint"
TRAIN_RUN = "fingerprint-train"
TRAIN_FLAGS = ["--warmup-steps", "4", "--steps", "4", "--eval-size", "32", "--eval-interval", "100",
               "--sampled-eval-size", "0", "--no-control", "--prompts-per-step", "4", "--group-size", "4",
               "--warmup-batch-size", "8", "--train-limit", "400", "--checkpoint-interval", "100"]
BENCH_TABLES = ("generations", "reward_scores", "benchmark_summary", "rejected_rows")


def aerorl(*args: str) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "aerorl_pipeline.cli", *args], cwd=ROOT, env=env, check=True)


def training_rows(database: Path) -> dict[str, list]:
    from aerorl_ops.storage.behaviour_rows import TRAINING_MEASURED

    with duckdb.connect(str(database), read_only=True) as conn:
        out = {}
        for table in ("training_steps", "training_evals"):
            names = [n for n, *_ in conn.execute(f'DESCRIBE "{table}"').fetchall()
                     if n not in TRAINING_MEASURED and n != "run_id"]
            selected = ", ".join(f'"{n}"' for n in names)
            out[table] = conn.execute(f'SELECT {selected} FROM "{table}" WHERE run_id = ? ORDER BY step, phase',
                                      [TRAIN_RUN]).fetchall()
        return out


def fingerprint(output: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from aerorl_ops.storage.behaviour_rows import behaviour_rows

    database = ROOT / "reports" / "aerorl.duckdb"
    aerorl("bench", "--run-id", BENCH_RUN)
    aerorl("train", "--run-name", TRAIN_RUN, "--no-resume", *TRAIN_FLAGS)
    found = {**behaviour_rows(str(database), BENCH_RUN, BENCH_TABLES), **training_rows(database)}
    text = json.dumps(found, default=str, indent=1).replace(str(ROOT), "<checkout>")  # e.g. model_source
    output.write_text(text)
    print(f"{output}: " + ", ".join(f"{table} {len(rows)} rows" for table, rows in found.items()))


def verdict(before: list[list] | None, after: list[list] | None) -> tuple[bool, str]:
    """Whether a table computes what it did, and the line that says so. Rows compare in order; a newer
    checkout may add columns at the end of a table's rows (a new column is not a changed value), and rows of
    its own (a dataset added to the shipped config): then every older row must still be there, equal on the
    older columns and in the same order, and the line names how many columns and rows were added, and the
    values the new columns hold.

    >>> verdict([[1, "a"]], [[1, "a"]])
    (True, 'identical (1 vs 1 rows)')
    >>> verdict([[1, "a"]], [[1, "a", None]])
    (True, 'identical on its 2 columns, plus 1 new at the end holding [null] (1 vs 1 rows)')
    >>> verdict([[1, "a"], [3, "c"]], [[1, "a", None], [2, "arc", 0.5], [3, "c", None]])
    (True, 'identical on its 2 columns, plus 1 new at the end holding [0.5], [null]; plus 1 new rows (2 vs 3 rows)')
    >>> verdict([[1, "a"]], [[2, "a", None]])
    (False, 'DIFFERENT (1 vs 1 rows)')
    >>> verdict([[1, "a"], [3, "c"]], [[3, "c"], [1, "a"]])
    (False, 'DIFFERENT (2 vs 2 rows)')
    """
    before, after = before or [], after or []
    counts = f"({len(before)} vs {len(after)} rows)"
    if before == after:
        return True, f"identical {counts}"
    width = len(before[0]) if before else 0
    if not before or any(len(row) < width for row in after) or not _in_order(before, [r[:width] for r in after]):
        return False, f"DIFFERENT {counts}"
    line = "identical"
    extra = {len(row) - width for row in after}
    if extra != {0}:
        held = sorted({json.dumps(row[width:]) for row in after})
        shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
        line += f" on its {width} columns, plus {max(extra)} new at the end holding {shown}"
    if len(after) > len(before):
        line += f"; plus {len(after) - len(before)} new rows"
    return True, f"{line} {counts}"


def _in_order(before: list[list], after: list[list]) -> bool:
    """Whether every row of ``before`` is in ``after``, in the same order (others may lie between)."""
    rest = iter(after)
    return all(any(old == new for new in rest) for old in before)


def compare(before: Path, after: Path) -> int:
    old, new = json.loads(before.read_text()), json.loads(after.read_text())
    differ = 0
    for table in sorted(set(old) | set(new)):
        same, line = verdict(old.get(table), new.get(table))
        differ += not same
        print(f"{table}: {line}")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", nargs="?", type=Path)
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    fingerprint(args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
