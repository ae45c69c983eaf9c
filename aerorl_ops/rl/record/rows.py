"""A training run as DuckDB rows: ``training_runs``, ``training_steps``, ``training_evals``,
``training_eval_types`` and ``training_eval_sources`` (row types and tables in
``aerorl_ops.storage.training_schema``), plus the ``eval_*`` rows of its sampled evaluations. Each builder
makes the rows of one record as it happens (``rl.record.recorder`` writes them)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, replace
from datetime import datetime

import pyarrow as pa

from aerorl_ops.config.rewards import REWARD_COMPONENT_NAMES
from aerorl_ops.config.training import Recipe
from aerorl_ops.eval_runner.eval_rows import EvalRunRecord, RoleEvaluation, eval_tables
from aerorl_ops.eval_runner.held_out import EvalResult
from aerorl_ops.rl.record.result import SampledEval, TrainingResult
from aerorl_ops.rl.runtime.policy import reference_mode
from aerorl_ops.rl.step.stats import StepStats
from aerorl_ops.storage.duckdb_store import PartitionWrite
from aerorl_ops.storage.training_schema import (
    TRAINING_EVAL_SOURCES,
    TRAINING_EVAL_TYPES,
    TRAINING_EVALS,
    TRAINING_STEPS,
    TrainingEvalRow,
    TrainingEvalSourceRow,
    TrainingEvalTypeRow,
    TrainingRunRow,
)
from aerorl_ops.telemetry import TelemetrySummary


class TrainingRunRecord(TrainingRunRow):
    """One ``training_runs`` row (its columns: ``aerorl_ops.storage.training_schema.TrainingRunRow``), built from
    a run's settings and result.

    :meth:`started` is the row written when the run starts (what it will do); :meth:`finished` completes
    it with what the run did."""

    @classmethod
    def started(cls, run_id: str, base_model: str, settings: Recipe, started_at: datetime,
                rejected_rows: int | None = None) -> TrainingRunRecord:
        """The row of a run of ``settings`` (its ``Recipe``: ``config`` records what it trains with) that has
        started; ``base_model``: where its base model loads from."""
        return cls(
            run_id=run_id, base_model=base_model, env=settings.env, algorithm=settings.algorithm,
            quant_bits=settings.quant_bits, reference_quantization_mode=reference_mode(settings),
            reference_source=None, reference_loaded=None, final_checkpoint=None, steps=settings.total_steps,
            resumed_from_step=None, swap_question_type=None, swap_questions=None, swap_changed=None,
            config=json.dumps(asdict(settings)), started_at=started_at, finished_at=None, telemetry=None,
            rejected_rows=rejected_rows)

    def finished(self, result: TrainingResult, finished_at: datetime,
                 telemetry: TelemetrySummary) -> TrainingRunRecord:
        """This row completed by the run's ``result``."""
        swap = result.swap
        return replace(
            self, reference_source=result.reference_source, reference_loaded=result.reference_loaded,
            reference_unquantized=(None if result.reference_unquantized is None
                                   else json.dumps(list(result.reference_unquantized))),
            final_checkpoint=str(result.final_checkpoint), resumed_from_step=result.resumed_from_step,
            swap_question_type=swap.question_type if swap else None, swap_questions=swap.questions if swap else None,
            swap_changed=swap.changed if swap else None, state_bytes_per_rank=result.state_bytes_per_rank,
            finished_at=finished_at,
            telemetry=json.dumps(telemetry.as_record()))

    @classmethod
    def of(cls, run_id: str, base_model: str, settings: Recipe, result: TrainingResult,
           started_at: datetime, finished_at: datetime, telemetry: TelemetrySummary) -> TrainingRunRecord:
        """The record of a finished run."""
        return cls.started(run_id, base_model, settings, started_at).finished(result, finished_at, telemetry)


def step_rows(run_id: str, steps: Iterable[StepStats]) -> pa.Table:
    """``training_steps`` rows of ``steps``."""
    return TRAINING_STEPS.rows(list(steps), run_id=run_id)


def eval_rows(run_id: str, evals: Iterable[EvalResult]) -> pa.Table:
    """``training_evals`` rows of ``evals`` (a multi-turn evaluation's episode figures in their columns)."""
    return TRAINING_EVALS.rows([TrainingEvalRow(
        step=e.step, phase=e.phase, wall_s=e.wall_s, accuracy=e.accuracy,
        accuracy_stderr=e.report.overall.standard_error, n=e.n, reward_mean=e.reward_mean,
        **{f"{name}_mean": e.component_means.get(name) for name in REWARD_COMPONENT_NAMES}, samples=e.n,
        distribution=e.distribution, return_stderr=e.episodes.return_stderr if e.episodes else None,
        mean_turns=e.episodes.mean_turns if e.episodes else None,
        mean_turns_stderr=e.episodes.turns_stderr if e.episodes else None)
        for e in evals], run_id=run_id)


def eval_type_rows(run_id: str, evals: Iterable[EvalResult]) -> pa.Table:
    """``training_eval_types`` rows of ``evals``: one per evaluation and question type."""
    return TRAINING_EVAL_TYPES.rows([TrainingEvalTypeRow(step=e.step, phase=e.phase, question_type=kind,
                                                         accuracy=value.accuracy, n=value.n,
                                                         distribution=e.distribution)
                                     for e in evals for kind, value in e.report.by_type.items()], run_id=run_id)


def eval_source_rows(run_id: str, evals: Iterable[EvalResult]) -> pa.Table:
    """``training_eval_sources`` rows of ``evals``: one per evaluation and source dataset of a mixture (none for
    a run on one dataset); accuracy None for a source without an item in the sample."""
    return TRAINING_EVAL_SOURCES.rows([TrainingEvalSourceRow(step=e.step, phase=e.phase, source=source,
                                                             accuracy=value.accuracy if value.n else None, n=value.n,
                                                             distribution=e.distribution)
                                       for e in evals for source, value in e.by_source.items()], run_id=run_id)


def sampled_eval_id(run_id: str, sampled: SampledEval) -> str:
    """The ``eval_id`` of a sampled evaluation during training: run, step, and the split it scored."""
    return f"{run_id}@{sampled.step}:{sampled.split or sampled.env}"


def sampled_eval_writes(run_id: str, sampled: SampledEval) -> list[PartitionWrite]:
    """The ``eval_runs`` / ``eval_samples`` / ``eval_metrics`` rows of one sampled evaluation (role
    ``model``, ``model`` = the run id, ``training_run_id`` and ``step`` set), each replacing its eval id's."""
    record = EvalRunRecord.of("model", run_id, sampled.outcome, dataset=sampled.env, split=sampled.split,
                              training_run_id=run_id, step=sampled.step, config={"phase": sampled.phase})
    return eval_tables(sampled_eval_id(run_id, sampled), [RoleEvaluation(record, sampled.outcome)])
