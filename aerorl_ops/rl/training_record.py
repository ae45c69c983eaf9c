"""A finished training run as DuckDB rows: ``training_runs``, ``training_steps``, ``training_evals``
and ``training_eval_types`` (schemas in ``aerorl_ops.storage.schema``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime

import pyarrow as pa

from aerorl_ops.config.rewards import REWARD_COMPONENT_NAMES
from aerorl_ops.evaluator.records import EvalRunRecord, RoleEvaluation, eval_tables
from aerorl_ops.rl.config import AeroRLConfig
from aerorl_ops.rl.held_out import EvalResult
from aerorl_ops.rl.runtimes import reference_mode
from aerorl_ops.rl.training_run import SampledEval, TrainingPlan, TrainingResult
from aerorl_ops.storage.duckdb_store import PartitionWrite
from aerorl_ops.storage.schema import TRAINING_EVAL_TYPES, TRAINING_EVALS, TRAINING_RUNS, TRAINING_STEPS
from aerorl_ops.telemetry import TelemetrySummary


@dataclass(frozen=True)
class TrainingRunRecord:
    """One ``training_runs`` row (the columns of ``aerorl_ops.storage.schema.TRAINING_RUNS``, in order)."""

    run_id: str
    base_model: str
    env: str
    algorithm: str
    quant_ref_bits: int
    reference_quantization_mode: str
    reference_source: str
    reference_loaded: bool
    final_checkpoint: str
    steps: int
    resumed_from_step: int
    swap_question_type: str | None
    swap_questions: int | None
    swap_changed: float | None
    config: str  # JSON: {"training": every setting of the run, "aerorl": the AeroRLConfig}
    started_at: datetime
    finished_at: datetime
    telemetry: str  # JSON: TelemetrySummary.as_record() over the whole run

    @classmethod
    def of(cls, run_id: str, base_model: str, env: str, config: AeroRLConfig, plan: TrainingPlan,
           result: TrainingResult, settings: Mapping[str, object], started_at: datetime, finished_at: datetime,
           telemetry: TelemetrySummary) -> TrainingRunRecord:
        """The record of a finished run; ``settings`` are the run's own settings (the asset's config)."""
        swap = result.swap
        return cls(
            run_id=run_id, base_model=base_model, env=env, algorithm=config.algorithm,
            quant_ref_bits=config.quant_ref_bits,
            reference_quantization_mode=reference_mode(config),
            reference_source=result.reference_source, reference_loaded=result.reference_loaded,
            final_checkpoint=str(result.final_checkpoint), steps=plan.total_steps,
            resumed_from_step=result.resumed_from_step,
            swap_question_type=swap.question_type if swap else None, swap_questions=swap.questions if swap else None,
            swap_changed=swap.changed if swap else None,
            config=json.dumps({"training": dict(settings), "aerorl": asdict(config)}),
            started_at=started_at, finished_at=finished_at, telemetry=json.dumps(telemetry.as_record()),
        )


def step_rows(run_id: str, result: TrainingResult) -> pa.Table:
    latest = {s.step: s for s in result.steps}  # a resumed run re-records steps after its checkpoint
    rows = [{"run_id": run_id, **latest[step].as_record()} for step in sorted(latest)]
    return pa.Table.from_pylist(rows, schema=TRAINING_STEPS.schema)


def eval_rows(run_id: str, evals: list[EvalResult]) -> pa.Table:
    rows = [{"run_id": run_id, "step": e.step, "phase": e.phase, "wall_s": e.wall_s, "accuracy": e.accuracy,
             "accuracy_stderr": e.report.overall.standard_error, "n": e.n, "reward_mean": e.reward_mean,
             **{f"{name}_mean": e.component_means.get(name) for name in REWARD_COMPONENT_NAMES}, "samples": e.n}
            for e in evals]
    return pa.Table.from_pylist(rows, schema=TRAINING_EVALS.schema)


def eval_type_rows(run_id: str, evals: list[EvalResult]) -> pa.Table:
    rows = [{"run_id": run_id, "step": e.step, "phase": e.phase, "question_type": kind, "accuracy": value.accuracy,
             "n": value.n} for e in evals for kind, value in e.report.by_type.items()]
    return pa.Table.from_pylist(rows, schema=TRAINING_EVAL_TYPES.schema)


def sampled_eval_id(run_id: str, sampled: SampledEval) -> str:
    """The ``eval_id`` of a sampled evaluation during training: run, step, and the split it scored."""
    return f"{run_id}@{sampled.step}:{sampled.split or sampled.env}"


def sampled_eval_tables(run_id: str, result: TrainingResult) -> list[PartitionWrite]:
    """The ``eval_runs`` / ``eval_samples`` / ``eval_metrics`` rows of the run's sampled evaluations
    (role ``model``, ``model`` = the run id, ``training_run_id`` and ``step`` set)."""
    writes: list[PartitionWrite] = []
    for sampled in result.sampled:
        record = EvalRunRecord.of("model", run_id, sampled.outcome, dataset=sampled.env, split=sampled.split,
                                  training_run_id=run_id, step=sampled.step, config={"phase": sampled.phase})
        writes += eval_tables(sampled_eval_id(run_id, sampled), [RoleEvaluation(record, sampled.outcome)])
    return writes


def training_tables(run_id: str, result: TrainingResult, record: TrainingRunRecord) -> list[PartitionWrite]:
    """The run's rows of each training table (each replaces the run's partition), then the rows of its
    sampled evaluations in the eval tables (so ensure ``TRAINING_TABLES + EVAL_TABLES`` first)."""
    key = {"run_id": run_id}
    return [PartitionWrite(TRAINING_RUNS, key, TRAINING_RUNS.rows([record])),
            PartitionWrite(TRAINING_STEPS, key, step_rows(run_id, result)),
            PartitionWrite(TRAINING_EVALS, key, eval_rows(run_id, result.evals)),
            PartitionWrite(TRAINING_EVAL_TYPES, key, eval_type_rows(run_id, result.evals)),
            *sampled_eval_tables(run_id, result)]
