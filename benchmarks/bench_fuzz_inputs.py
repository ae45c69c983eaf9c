"""Fuzzed inputs (issue 38, item 5): 10,000 config and rows cases through what ``aerorl bench`` calls on them.

Each case is drawn by the hypothesis strategies of ``tests/reliability`` (``fuzz_configs``: the shipped config
mutated in every table, or garbage; ``fuzz_rows``: MAYE JSONL and verl Parquet files with broken records,
images and columns) and judged in-process by their property (``fuzz_outcomes``), with model loading refused:
accepted (rows: each record a row or a rejection with a one-line reason), rejected by one of the project's
input errors (one message of at most 3 lines naming the input: what the command prints, exit 2), or a failure
(any other exception, a longer message or one not naming the input, a lost record, a row reading an image
outside its folder, a Python warning, a case running past 30 s).

It prints, per kind of case and in all: cases, accepted, rejected, failures, the longest message's lines and
characters, the records read with the rows and rejections they became, and cases per second (process CPU
time and wall time). Each failure is printed once per kind of failure with its minimal input: hypothesis reruns the same
seed until that failure and shrinks it. Exit 1 when a case failed.

    python benchmarks/bench_fuzz_inputs.py              # 10,000 cases: half configs, a quarter JSONL, a quarter Parquet
    python benchmarks/bench_fuzz_inputs.py --cases 400  # a quick look
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
sys.path.insert(0, str(ROOT / "tests" / "reliability"))  # the strategies and the property the tests use

import hypothesis  # noqa: E402
import pytest  # noqa: E402
from fuzz_configs import config_cases  # noqa: E402
from fuzz_outcomes import ACCEPTED, FAILURE, REJECTED, Outcome, config_outcome, rows_outcome  # noqa: E402
from fuzz_rows import jsonl_cases, parquet_cases  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from model_loads import refuse_model_loads  # noqa: E402


@dataclass(frozen=True)
class Stream:
    """One kind of case: its share of the cases, its strategy and its judge."""

    name: str
    share: float
    cases: Any
    judge: Callable[[Any], Outcome]


STREAMS = (Stream("config", 0.5, config_cases, config_outcome), Stream("jsonl", 0.25, jsonl_cases(), rows_outcome),
           Stream("parquet", 0.25, parquet_cases(), rows_outcome))


@dataclass
class Tally:
    """What the cases of one stream gave."""

    cases: int = 0
    verdicts: dict[str, int] = field(default_factory=lambda: {ACCEPTED: 0, REJECTED: 0, FAILURE: 0})
    max_lines: int = 0
    max_chars: int = 0
    records: int = 0
    rows: int = 0
    rejections: int = 0
    failures: dict[str, tuple[str, Any]] = field(default_factory=dict)
    """The first case of each failure signature, with its detail."""
    cpu_s: float = 0.0
    wall_s: float = 0.0

    def add(self, outcome: Outcome, case: Any) -> None:
        self.cases += 1
        self.verdicts[outcome.verdict] += 1
        self.max_lines = max(self.max_lines, outcome.lines)
        if outcome.verdict == REJECTED:
            self.max_chars = max(self.max_chars, len(outcome.detail))
        self.rows, self.rejections = self.rows + outcome.items, self.rejections + outcome.rejected
        self.records += outcome.items + outcome.rejected
        if outcome.verdict == FAILURE:
            self.failures.setdefault(outcome.signature, (outcome.detail, case))

    def merged(self, other: Tally) -> Tally:
        verdicts = {key: self.verdicts[key] + other.verdicts[key] for key in self.verdicts}
        return Tally(self.cases + other.cases, verdicts, max(self.max_lines, other.max_lines),
                     max(self.max_chars, other.max_chars), self.records + other.records, self.rows + other.rows,
                     self.rejections + other.rejections, {**self.failures, **other.failures},
                     self.cpu_s + other.cpu_s, self.wall_s + other.wall_s)


def quiet_settings(count: int, phases: tuple[Phase, ...]) -> settings:
    return settings(max_examples=count, phases=phases, database=None, deadline=None,
                    suppress_health_check=list(HealthCheck), report_multiple_bugs=False)


def tally(stream: Stream, count: int, seed: int) -> Tally:
    """``count`` cases of ``stream`` drawn with ``seed`` (generation only: every case runs, none stops it)."""
    result = Tally()

    @hypothesis.seed(seed)
    @quiet_settings(count, (Phase.generate,))
    @given(stream.cases)
    def run(case):
        result.add(stream.judge(case), case)

    cpu, wall = time.process_time(), time.perf_counter()
    run()
    result.cpu_s, result.wall_s = time.process_time() - cpu, time.perf_counter() - wall
    return result


class SameFailure(Exception):
    """Raised for the failure being shrunk, so hypothesis keeps the smallest case that still gives it."""


def minimal_case(stream: Stream, signature: str, count: int, seed: int) -> Any | None:
    """The smallest case hypothesis finds failing with ``signature``: the run of ``tally`` repeated until that
    failure, then shrunk; None when the rerun does not meet it."""
    failing: list[Any] = []

    @hypothesis.seed(seed)
    @quiet_settings(count, (Phase.generate, Phase.shrink))
    @given(stream.cases)
    def rerun(case):
        if stream.judge(case).signature == signature:
            failing.append(case)
            raise SameFailure(signature)

    try:
        rerun()
    except SameFailure:
        return failing[-1]  # hypothesis runs the shrunk case last
    return None


COLUMNS = (("kind", 8), ("cases", 6), ("accepted", 8), ("rejected", 8), ("failures", 8), ("max lines", 9),
           ("max chars", 9), ("records", 7), ("rows", 6), ("rejections", 10), ("cases/s CPU", 11),
           ("cases/s wall", 12))


def table(rows: list[tuple[str, Tally]]) -> str:
    lines = [" ".join(f"{name:<{width}}" if name == "kind" else f"{name:>{width}}" for name, width in COLUMNS)]
    lines.append("-" * len(lines[0]))
    for name, counts in rows:
        values = (name, counts.cases, counts.verdicts[ACCEPTED], counts.verdicts[REJECTED], counts.verdicts[FAILURE],
                  counts.max_lines, counts.max_chars, counts.records, counts.rows, counts.rejections,
                  f"{counts.cases / counts.cpu_s:.1f}", f"{counts.cases / counts.wall_s:.1f}")
        lines.append(" ".join(f"{value:<{width}}" if column == "kind" else f"{value:>{width}}"
                              for value, (column, width) in zip(values, COLUMNS, strict=True)))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000, help="cases in all (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed (default: %(default)s)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", module="PIL")  # a damaged TIFF's "Truncated File Read": its row is rejected
    with pytest.MonkeyPatch.context() as patch:
        loads = refuse_model_loads(patch)
        tallies = [(stream, tally(stream, round(args.cases * stream.share), args.seed)) for stream in STREAMS]
        total = Tally()
        for _, counts in tallies:
            total = total.merged(counts)
        print(table([(stream.name, counts) for stream, counts in tallies] + [("all", total)]))
        print(f"model loads: {len(loads)}")
        for stream, counts in tallies:
            for signature, (detail, first) in counts.failures.items():
                smallest = minimal_case(stream, signature, round(args.cases * stream.share), args.seed)
                print(f"\nFAILURE ({stream.name}) {signature}\n  {detail}\n  minimal input: "
                      f"{smallest if smallest is not None else first!r}")
    return 1 if total.verdicts[FAILURE] or loads else 0


if __name__ == "__main__":
    sys.exit(main())
