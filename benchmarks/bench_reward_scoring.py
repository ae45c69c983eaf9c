"""Per-record vs columnar reward scoring on large generated replays, in one run.

Algorithm: for each data shape, generate ``--records`` seeded replay records, write them
as JSONL to a temporary directory, then time

- per-record: read the JSONL with ``json`` (``iter_replay_records``) + ``evaluate_records``;
- columnar: ``read_replay`` + ``evaluate_table``;

on the same file with the default reward stack (each timing starts from a collected heap
and keeps only the numbers it is checked on), check that both give the same totals and
summary numbers, and print records/s for each and their ratio.

Shapes: ``repeated`` draws references, entities and responses from a small pool (as a
benchmark replays the same questions across models and batch sizes); ``unique`` makes
every string unique (ids, prompts, responses, references, entities and their numbers).

    python benchmarks/bench_reward_scoring.py --records 1000000
    python benchmarks/bench_reward_scoring.py --quick
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from aerorl_ops.replay.reader import iter_replay_records, read_replay
from aerorl_ops.rewards import evaluate_records, evaluate_table

SHAPES = ("repeated", "unique")
QUICK_RECORDS = 20_000
_WORDS = (
    "invoice total revenue march april report board paper smoke blend panel chart share "
    "growth index market value north south east west profit loss rate tax fund"
).split()


class Question(NamedTuple):
    dataset: str
    aliases: list[str]


def _question(rng: random.Random, serial: int | None) -> Question:
    """One question's accepted answers: a phrase (DocVQA-like), or a number or percent
    (ChartQA-like), with variants. A ``serial`` makes every string unique."""
    kind = rng.random()
    suffix = "" if serial is None else f" {serial}"
    if kind < 0.4:
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 3)))
        base = f"{words}{suffix}"
        return Question("docvqa", [base, base.title() + "."][: rng.randint(1, 2)])
    if kind < 0.7:
        number = rng.randint(1, 99_999) if serial is None else serial * 10 + rng.randint(0, 9)
        return Question("chartqa", [f"{number}", f"{number:,}"][: rng.randint(1, 2)])
    value = round(rng.uniform(0.1, 99.9), 1) if serial is None else serial / 1000 + 0.5
    return Question("chartqa", [f"{value}%", f"about {value} percent"][: rng.randint(1, 2)])


def generate_records(count: int, shape: str, seed: int = 0) -> Iterator[dict[str, Any]]:
    """Seeded replay records of one data shape (see the module docstring)."""
    rng = random.Random(seed)
    pool = [_question(rng, None) for _ in range(500)] if shape == "repeated" else None
    for index in range(count):
        question = pool[rng.randrange(len(pool))] if pool is not None else _question(rng, index)
        dataset, aliases = question
        roll = rng.random()
        if roll < 0.6:
            answer = rng.choice(aliases)
        elif roll < 0.8:
            answer = f"the answer is {aliases[0]}"
        else:
            other = pool[rng.randrange(len(pool))] if pool is not None else _question(rng, index + count)
            answer = other.aliases[0]
        prompt_id = rng.randrange(len(pool)) if pool is not None else index
        yield {
            "id": f"{dataset}::{index}",
            "prompt": f"Question {prompt_id}: what does the document say?",
            "response": json.dumps({"answer": answer}) if rng.random() < 0.5 else answer,
            "reference": aliases[0] if len(aliases) == 1 else aliases,
            "metadata": {
                "evidence_entities": list(aliases),
                "claimed_entities": [answer],
                "latency_ms": round(rng.uniform(50.0, 900.0), 3),
                "generated_tokens": len(answer.split()),
                "dataset": dataset,
                "raw_response": answer,
            },
        }


def write_jsonl(path: Path, records: Iterator[dict[str, Any]]) -> int:
    count = 0
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
            count += 1
    return count


class Run(NamedTuple):
    """One timed scoring of a file: seconds, and what the two paths must agree on."""

    seconds: float
    numbers: dict[str, Any]
    totals: list[float]


SUMMARY_NUMBERS = ("count", "average_reward", "pass_rate", "component_averages", "best_examples", "worst_examples")


def _timed(score) -> Run:
    """Time ``score()`` from a collected heap; keep only the numbers, so the next timing
    does not run beside a million live result dicts."""
    gc.collect()
    start = time.perf_counter()
    summary = score()
    seconds = time.perf_counter() - start
    results = summary["results"]
    totals = (
        results.column("total").to_pylist()
        if hasattr(results, "column")
        else [item["reward"]["total_reward"] for item in results]
    )
    return Run(seconds, {key: summary[key] for key in SUMMARY_NUMBERS}, totals)


def time_per_record(path: Path) -> Run:
    return _timed(lambda: evaluate_records(iter_replay_records(path)))


def time_columnar(path: Path) -> Run:
    return _timed(lambda: evaluate_table(read_replay(path)))


def check_agreement(per_record: Run, columnar: Run) -> None:
    """Fail loudly if the two scorers disagree on any total or summary number."""
    for key, value in per_record.numbers.items():
        if columnar.numbers[key] != value:
            raise AssertionError(f"{key}: per-record {value!r} != columnar {columnar.numbers[key]!r}")
    if per_record.totals != columnar.totals:
        raise AssertionError("per-record totals differ from columnar totals")


def run_shape(shape: str, records: int, directory: Path, seed: int) -> float:
    path = directory / f"replay-{shape}.jsonl"
    write_jsonl(path, generate_records(records, shape, seed))
    size_mb = path.stat().st_size / 1e6
    per_record = time_per_record(path)
    columnar = time_columnar(path)
    check_agreement(per_record, columnar)
    ratio = per_record.seconds / columnar.seconds if columnar.seconds > 0 else math.inf
    print(
        f"{shape:>8}: {records:,} records ({size_mb:,.0f} MB) | "
        f"per-record {records / per_record.seconds:,.0f} rec/s ({per_record.seconds:.2f} s) | "
        f"columnar {records / columnar.seconds:,.0f} rec/s ({columnar.seconds:.2f} s) | "
        f"ratio {ratio:.1f}x",
        flush=True,
    )
    return ratio


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records per data shape")
    parser.add_argument("--quick", action="store_true", help=f"use {QUICK_RECORDS:,} records")
    parser.add_argument("--shape", choices=SHAPES, action="append", help="only this shape (repeatable)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    records = QUICK_RECORDS if args.quick else args.records
    ratios = {}
    with tempfile.TemporaryDirectory(prefix="bench-rewards-") as tmp:
        for shape in args.shape or SHAPES:
            ratios[shape] = run_shape(shape, records, Path(tmp), args.seed)
    print("ratios (per-record time / columnar time): " + ", ".join(f"{k} {v:.1f}x" for k, v in ratios.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
