"""Data checks of a benchmark partition, as plain functions over tables and the report database.

Each ``*_findings`` / ``*_regressions`` function returns what is wrong (an empty result means
the check passes); the Dagster asset checks in ``assets/checks.py`` only turn those results
into check results.

- prompt echoes: a response that equals, starts with or contains the prompt text, or holds the
  chat template's ``<|im_start|>``: what decoding the whole sequence instead of only the new
  tokens records for an empty generation;
- invalid latencies: null, NaN, infinite or negative ``latency_ms`` / ``batch_latency_ms``;
- NaN scores: a NaN in any score column, or a missing total reward (a null ANLS or relaxed
  accuracy is fine: each row has only its dataset's metric);
- sample-id mismatches between a partition's generations and its scores;
- regressions: pass rate or throughput below the previous run's by more than a relative margin;
- batch-size drift: greedy answers at batch N that differ from batch 1 (lmms-eval issue 970).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from aerorl_ops.config.rewards import REWARD_COMPONENT_NAMES
from aerorl_ops.metrics import TREND_METRICS

CHAT_TEMPLATE_MARKER = "<|im_start|>"
LATENCY_COLUMNS = ("latency_ms", "batch_latency_ms")
SCORE_COLUMNS = (*REWARD_COMPONENT_NAMES, "total_reward", "anls", "relaxed_accuracy")
REQUIRED_SCORE_COLUMNS = ("total_reward",)
REGRESSION_METRICS = ("pass_rate", "accuracy", "samples_per_s")
REFERENCE_BATCH_SIZE = 1


class Finding(NamedTuple):
    """One offending row: its sample id, what is wrong, and the value (shortened)."""

    sample_id: str
    problem: str
    value: str


def _short(value: object, limit: int = 80) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def prompt_echo_findings(generations: pa.Table) -> list[Finding]:
    """Rows of a ``generations`` table whose response echoes the prompt or the chat template.

    >>> table = pa.table({"sample_id": ["a", "b"], "prompt": ["Q?", "Q?"], "response": ["12", "user\\nQ?"]})
    >>> [f.problem for f in prompt_echo_findings(table)]
    ['contains the prompt']
    """
    findings = []
    for row in generations.select(["sample_id", "prompt", "response"]).to_pylist():
        response, prompt = row["response"] or "", (row["prompt"] or "").strip()
        problem = None
        if CHAT_TEMPLATE_MARKER in response:
            problem = f"contains the chat template's {CHAT_TEMPLATE_MARKER}"
        elif prompt and response.strip() == prompt:
            problem = "equals the prompt"
        elif prompt and response.strip().startswith(prompt):
            problem = "starts with the prompt"
        elif prompt and prompt in response:
            problem = "contains the prompt"
        if problem:
            findings.append(Finding(row["sample_id"], problem, _short(response)))
    return findings


def latency_findings(generations: pa.Table) -> list[Finding]:
    """Rows whose latencies are missing, NaN, infinite or negative."""
    findings = []
    for row in generations.select(["sample_id", *LATENCY_COLUMNS]).to_pylist():
        for column in LATENCY_COLUMNS:
            value = row[column]
            if value is None or not math.isfinite(value) or value < 0:
                findings.append(Finding(row["sample_id"], f"{column} is {value}", str(value)))
    return findings


def nan_score_findings(scores: pa.Table) -> list[Finding]:
    """Rows with a NaN in any score column, or no total reward at all."""
    findings = []
    ids = scores.column("sample_id").to_pylist()
    for column in SCORE_COLUMNS:
        values = scores.column(column)
        nan = pc.fill_null(pc.is_nan(values), False).to_pylist()
        missing = values.is_null().to_pylist() if column in REQUIRED_SCORE_COLUMNS else [False] * len(ids)
        findings += [Finding(sample_id, f"{column} is NaN", "nan")
                     for sample_id, bad in zip(ids, nan, strict=True) if bad]
        findings += [Finding(sample_id, f"{column} is missing", "null")
                     for sample_id, bad in zip(ids, missing, strict=True) if bad]
    return findings


class SampleIdMismatch(NamedTuple):
    missing: list[str]      # generated, never scored
    unexpected: list[str]   # scored, never generated
    duplicated: list[str]   # scored more than once

    @property
    def ok(self) -> bool:
        return not (self.missing or self.unexpected or self.duplicated)


def sample_id_mismatch(generation_ids: Iterable[str], score_ids: Iterable[str]) -> SampleIdMismatch:
    """How the scored sample ids differ from the generated ones (each sorted).

    >>> sample_id_mismatch(["a", "b", "c"], ["a", "a", "d"])
    SampleIdMismatch(missing=['b', 'c'], unexpected=['d'], duplicated=['a'])
    """
    generated, scored = list(generation_ids), Counter(score_ids)
    return SampleIdMismatch(
        missing=sorted(set(generated) - set(scored)),
        unexpected=sorted(set(scored) - set(generated)),
        duplicated=sorted(sample_id for sample_id, count in scored.items() if count > 1),
    )


class Regression(NamedTuple):
    metric: str
    previous: float
    current: float

    @property
    def relative_change(self) -> float:
        return (self.current - self.previous) / self.previous


class PreviousRun(NamedTuple):
    """A partition's summary metrics on one dataset, and the same model x batch x dataset's in the run before it."""

    run_id: str
    previous_run_id: str | None
    current: dict[str, float | None]
    previous: dict[str, float | None]
    dataset: str = ""


def regressions(current: Mapping[str, float | None], previous: Mapping[str, float | None],
                max_relative_drop: float, metrics: Sequence[str] = REGRESSION_METRICS) -> list[Regression]:
    """Metrics that fell below ``previous * (1 - max_relative_drop)``; missing or zero baselines are skipped.

    >>> regressions({"pass_rate": 0.4, "samples_per_s": 9.5}, {"pass_rate": 0.5, "samples_per_s": 10.0}, 0.1)
    [Regression(metric='pass_rate', previous=0.5, current=0.4)]
    """
    if not 0 <= max_relative_drop < 1:
        raise ValueError(f"max_relative_drop must be in [0, 1), got {max_relative_drop}")
    found = []
    for metric in metrics:
        before, now = previous.get(metric), current.get(metric)
        if before is None or now is None or not before > 0:
            continue
        if now < before * (1 - max_relative_drop):
            found.append(Regression(metric, float(before), float(now)))
    return found


def previous_runs(conn: duckdb.DuckDBPyConnection, run_id: str, model_key: str, batch_size: int,
                  metrics: Sequence[str] = REGRESSION_METRICS) -> list[PreviousRun]:
    """This partition's metrics and their predecessors', one per dataset in dataset order, from the
    ``benchmark_trends`` view (empty when the partition is not in ``benchmark_summary``)."""
    unknown = [m for m in metrics if m not in TREND_METRICS]
    if unknown:
        raise ValueError(f"benchmark_trends has no previous values of {unknown}; it tracks {TREND_METRICS}")
    columns = ", ".join(f"{m}, previous_{m}" for m in metrics)
    rows = conn.execute(
        f"SELECT dataset, previous_run_id, {columns} FROM benchmark_trends "
        "WHERE run_id = ? AND model_key = ? AND batch_size = ? ORDER BY dataset",
        [run_id, model_key, batch_size],
    ).fetchall()
    return [PreviousRun(run_id, row[1], current=dict(zip(metrics, row[2:][0::2], strict=True)),
                        previous=dict(zip(metrics, row[2:][1::2], strict=True)), dataset=row[0])
            for row in rows]


class ResponseDrift(NamedTuple):
    """Responses of the same samples at a reference batch size and at another batch size."""

    compared: int
    mismatches: list[tuple[str, str, str]]  # (sample_id, response at the reference, response at this batch)
    only_in_reference: list[str]
    only_in_candidate: list[str]

    @property
    def mismatch_rate(self) -> float:
        return len(self.mismatches) / self.compared if self.compared else 0.0


def response_drift(reference: Mapping[str, str], candidate: Mapping[str, str]) -> ResponseDrift:
    """Compare responses per sample id (each list sorted by sample id).

    >>> response_drift({"a": "1", "b": "2"}, {"a": "1", "b": "3", "c": "4"}).mismatches
    [('b', '2', '3')]
    """
    common = sorted(reference.keys() & candidate.keys())
    return ResponseDrift(
        compared=len(common),
        mismatches=[(s, reference[s], candidate[s]) for s in common if reference[s] != candidate[s]],
        only_in_reference=sorted(reference.keys() - candidate.keys()),
        only_in_candidate=sorted(candidate.keys() - reference.keys()),
    )


def responses_by_sample(conn: duckdb.DuckDBPyConnection, run_id: str, model_key: str,
                        batch_size: int) -> dict[str, str]:
    """``generations.response`` per sample id of one partition (empty when it has not landed)."""
    rows = conn.execute(
        "SELECT sample_id, response FROM generations WHERE run_id = ? AND model_key = ? AND batch_size = ?",
        [run_id, model_key, batch_size],
    ).fetchall()
    return dict(rows)
