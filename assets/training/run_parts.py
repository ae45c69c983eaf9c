"""What the ``rl_run`` step adds to the library's run (``aerorl_ops.rl.run.train_and_record``): the values it
hands the library from its run config and resources (its environments' cached rows included, read through
the Parquet IO manager here or by each torchrun rank), the Pipes messages of a torchrun rank 0, and the
materialization's metadata made of the run as stored."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
import pyarrow as pa
from dagster_duckdb import DuckDBResource

from aerorl_ops.eval_runner.held_out import EvalResult
from aerorl_ops.models.checkpoint_refs import checkpoints_dir
from aerorl_ops.rl.record.reporters import NullReporter
from aerorl_ops.rl.run.train_and_record import ModelPlace, RecordedRun, ReportPlace, RunOptions
from aerorl_ops.rl.step.stats import StepStats
from assets.figures import training_figures
from assets.io_managers import ParquetTableIOManager
from assets.metadata import markdown_preview, readable
from assets.resources import ModelRuntime
from assets.run_rows import cached_tables

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


def rows_extras(store: ParquetTableIOManager, keys: Mapping[str, dg.AssetKey]) -> dict[str, Any]:
    """What a torchrun rank needs to read the run's cached rows itself (``rows_of_extras``): the IO manager's
    settings and the rows assets' keys by stage."""
    return {"store": {"base_dir": store.base_dir, "storage_options": dict(store.storage_options)},
            "keys": {stage: list(key.path) for stage, key in keys.items()}}


def rows_of_extras(extras: Mapping[str, Any]) -> dict[str, pa.Table]:
    """The cached rows' tables by stage that ``rows_extras`` points at (those stored)."""
    return cached_tables(ParquetTableIOManager(**extras["store"]),
                         {stage: dg.AssetKey(path) for stage, path in extras["keys"].items()})


def inputs_metadata(run: RecordedRun) -> dict[str, Any]:
    """Where each environment of ``run`` came from: a table (stage, dataset, split, limit, seed, cached rows or
    the source and why, items, content hash) and each content hash as ``<stage>_rows_sha256``."""
    frame = pd.DataFrame([{"stage": stage, "dataset": came.dataset.name, "split": came.dataset.split,
                           "limit": came.dataset.limit or "all", "seed": came.dataset.seed,
                           "from": "cached rows" if came.cached else f"source: {came.why_source}",
                           "items": came.items, "content_sha256": came.content_sha256}
                          for stage, came in run.inputs.items()])
    return {"inputs": markdown_preview(frame, rows=len(frame), max_chars=200),
            **{f"{stage}_rows_sha256": came.content_sha256 for stage, came in run.inputs.items()}}


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
        **inputs_metadata(run),
        **figures,
    })
