"""Evaluations as DuckDB rows: ``eval_runs``, ``eval_samples``, ``eval_metrics`` and ``eval_comparisons``
(row types and tables in ``aerorl_ops.storage.eval_schema``). Every table is keyed by ``eval_id``: one write
replaces an eval's rows in all four, so a rerun under the same id leaves no stale rows.

A training run that records its evaluations gives each one an ``eval_id`` (e.g. ``<run_id>/step-<N>``),
one :class:`RoleEvaluation` in the role 'model' with ``training_run_id`` and ``step`` set, and no
comparisons. ``rejected_rows`` counts the dataset rows the eval's environment rejected; the rows
themselves go to ``rejected_rows`` (``aerorl_ops.envs.rejections``) under the eval id.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime

import pyarrow as pa

from aerorl_ops.eval_runner.runner import EvalOutcome
from aerorl_ops.storage.duckdb_store import PartitionWrite
from aerorl_ops.storage.eval_schema import (
    EVAL_COMPARISONS,
    EVAL_METRICS,
    EVAL_RUNS,
    EVAL_SAMPLES,
    ComparisonRow,
    EvalRunRow,
)


class EvalRunRecord(EvalRunRow):
    """One ``eval_runs`` row, less ``eval_id`` (its columns: ``aerorl_ops.storage.eval_schema.EvalRunRow``),
    built by :meth:`of` from a model's outcome."""

    @classmethod
    def of(cls, role: str, model: str, outcome: EvalOutcome, *, model_source: str | None = None,
           dataset: str | None = None, split: str | None = None, device: str | None = None,
           started_at: datetime | None = None, finished_at: datetime | None = None,
           training_run_id: str | None = None, step: int | None = None,
           config: Mapping[str, object] | None = None, rejected_rows: int | None = None,
           cpu_s: float | None = None) -> EvalRunRecord:
        return cls(role=role, model=model, model_source=model_source, dataset=dataset, split=split,
                   questions=len(outcome.indices), settings=json.dumps([asdict(s) for s in outcome.settings]),
                   max_new_tokens=outcome.max_new_tokens, seed=outcome.seed, training_run_id=training_run_id,
                   step=step, device=device, started_at=started_at, finished_at=finished_at, wall_s=outcome.wall_s,
                   config=json.dumps(dict(config)) if config is not None else None, rejected_rows=rejected_rows,
                   cpu_s=cpu_s)


@dataclass(frozen=True)
class RoleEvaluation:
    """One model's evaluation within an eval: its ``eval_runs`` record and its outcome."""

    record: EvalRunRecord
    outcome: EvalOutcome


def eval_tables(eval_id: str, evaluations: Sequence[RoleEvaluation], comparisons: Sequence[ComparisonRow] = (),
                distribution: str | None = None) -> list[PartitionWrite]:
    """The eval's rows of each ``eval_*`` table (each write replaces the eval's partition); ``distribution``: the
    held-out distribution it scored (``storage.eval_schema.DISTRIBUTION``), None for the dataset itself."""
    roles = [evaluation.record.role for evaluation in evaluations]
    if not roles or len(set(roles)) != len(roles):
        raise ValueError(f"eval {eval_id!r}: give one evaluation per role, got roles {roles}")
    key, shown = {"eval_id": eval_id}, {"eval_id": eval_id, "distribution": distribution}
    samples = [EVAL_SAMPLES.rows(e.outcome.samples, **shown, role=e.record.role) for e in evaluations]
    metrics = [EVAL_METRICS.rows(e.outcome.metrics, **shown, role=e.record.role) for e in evaluations]
    return [PartitionWrite(EVAL_RUNS, key, EVAL_RUNS.rows([e.record for e in evaluations], eval_id=eval_id)),
            PartitionWrite(EVAL_SAMPLES, key, pa.concat_tables(samples)),
            PartitionWrite(EVAL_METRICS, key, pa.concat_tables(metrics)),
            PartitionWrite(EVAL_COMPARISONS, key, EVAL_COMPARISONS.rows(comparisons, **shown))]
