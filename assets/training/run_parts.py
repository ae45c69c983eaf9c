"""What the ``rl_run`` step adds to the library's run (``aerorl_ops.rl.run.train_and_record``): the values it
hands the library from its run config and resources, the Pipes messages of a torchrun rank 0, and the
materialization's metadata made of the run as stored."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
from dagster_duckdb import DuckDBResource

from aerorl_ops.eval_runner.held_out import EvalResult
from aerorl_ops.models.checkpoint_refs import checkpoints_dir
from aerorl_ops.rl.record.reporters import NullReporter
from aerorl_ops.rl.run.train_and_record import ModelPlace, RecordedRun, ReportPlace, RunOptions
from aerorl_ops.rl.step.stats import StepStats
from assets.figures import training_figures
from assets.metadata import markdown_preview, readable
from assets.resources import ModelRuntime

Report = Callable[[str, dict[str, Any]], None]
"""Called with ("step", a StepStats record) or ("eval", an evaluation's summary) as they happen."""


class MessageReporter(NullReporter):
    """Each step and held-out evaluation as a message (a torchrun rank 0's Pipes custom messages)."""

    def __init__(self, report: Report) -> None:
        self.report = report

    def on_step(self, stats: StepStats) -> None:
        self.report("step", stats.as_record())

    def on_eval(self, evaluation: EvalResult) -> None:
        overall = evaluation.report.overall
        self.report("eval", {"step": evaluation.step, "phase": evaluation.phase, "accuracy": overall.accuracy,
                             "stderr": overall.standard_error, "n": overall.n})


def run_options(values: dict[str, Any]) -> RunOptions:
    """The run fields (``rl_run.RUN_FIELDS``) of a run config's values."""
    return RunOptions(values["run_name"], values["resume"], values["progress_bar"], values["wandb_project"],
                      values["wandb_mode"])


def model_place(runtime: ModelRuntime) -> ModelPlace:
    return ModelPlace(Path(runtime.models_dir), runtime.local_files_only, runtime.device, runtime.torch_threads,
                      runtime.telemetry_interval_s)


def report_place(duckdb: DuckDBResource, runtime: ModelRuntime) -> ReportPlace:
    """Rows in ``duckdb``'s database, checkpoints beside the runtime's models folder (``data/checkpoints``),
    where a ``run_id@step`` reference finds them (``aerorl_ops.models.checkpoint_refs``)."""
    return ReportPlace(duckdb.database, duckdb.get_connection, checkpoints_dir(Path(runtime.models_dir)))


def run_metadata(run: RecordedRun, duckdb: DuckDBResource) -> dict[str, Any]:
    """The materialization's metadata, read back from what is stored for the run, with its figures
    (PNGs under reports/plots/training/<run_id>)."""
    stored = run.stored
    figures = training_figures(duckdb.database, run.run_id)
    return readable({
        "run_id": run.run_id,
        "final_checkpoint": dg.MetadataValue.path(str(stored.record.final_checkpoint)),
        "reference_quantization_mode": stored.record.reference_quantization_mode,
        "final_accuracy": stored.accuracy("final"),
        "warmup_accuracy": stored.accuracy("warmup"),
        "swap_changed": stored.record.swap_changed,
        "resumed_from_step": stored.record.resumed_from_step,
        "rejected_rows": stored.record.rejected_rows,
        "evaluations": markdown_preview(stored.evaluation_summary(), rows=50),
        **figures,
    })
