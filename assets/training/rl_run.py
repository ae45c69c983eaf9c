"""``rl_run``: warm-up then RL of a policy on a task environment, against a frozen quantized reference.

The environment (``env``, default easy-VQA) supplies training items and a fixed held-out sample
(``eval_size`` items of ``eval_split``, seed 0). Per-step metrics, evaluations (overall and per
question type, with the no-image prior and the supervised control) and the run land in DuckDB as
they happen, with the rows the environments rejected; checkpoints under ``data/checkpoints/<run>``.
Rerunning the same config resumes from the newest complete checkpoint, keeping every stored row; a
finished run is not trained again (``rl.recorded_run``); ``resume=False`` starts the run over.

With ``nproc_per_node`` > 1 the run happens on that many torchrun ranks, launched through Dagster
Pipes (``assets.training.torchrun``); rank 0 then does what this step does in process: the same
:func:`train_and_record`, reported back as this asset's materialization.
"""

import hashlib
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
from dagster_duckdb import DuckDBResource

from aerorl_ops.config.benchmark import BenchmarkConfig, model_entry
from aerorl_ops.config.fields import ConfigError, checked
from aerorl_ops.config.training import LAUNCH_SETTINGS, TrainingSettings
from aerorl_ops.models.entry import GenerationBackend
from aerorl_ops.models.sources import model_source
from aerorl_ops.rl.distributed import SINGLE, DataParallel
from aerorl_ops.rl.recorded_run import Log, record_training
from aerorl_ops.rl.run_inputs import training_environments, validation_environment
from aerorl_ops.rl.run_recorder import HELD_OUT_STAGE, TRAINING_STAGE, Rejections, RunRecorder
from aerorl_ops.rl.training_record import TrainingRunRecord
from aerorl_ops.rl.training_run import TrainingResult, run_training
from aerorl_ops.storage.database_check import check_report_database
from aerorl_ops.telemetry import TelemetrySampler
from assets.figures import training_figures
from assets.metadata import markdown_preview
from assets.project import DATA_DIR
from assets.resources import ModelRuntime
from assets.settings_config import config_class, settings_values
from assets.training.progress import Progress, Report
from assets.training.torchrun import launch_ranks

WHERE = "rl_run config"
SAFE_RUN_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}$")

TRAINING_DOC = """Training settings of this run; the defaults are the config file's [training].

base_model: a model key from the config file, or a checkpoint directory. env: the task
environment; the held-out sample is a fixed draw (seed 0) of eval_size items of eval_split, and
the training items are train_split (train_limit of them, 0 = all). steps: RL steps after
``warmup_steps`` supervised steps. quant_bits: reference as nf4 (4), int8 (8) or unquantized (16)."""
RUN_FIELDS = {
    "run_name": (str, "", "run id (default: derived from the settings; the same settings resume)"),
    "resume": (bool, True, "resume from this run's latest checkpoint when there is one"),
    "progress_bar": (bool, False, "show a progress bar on the terminal"),
    "wandb_project": (str, "", "also log to this wandb project when wandb is installed (empty = TensorBoard only)"),
    "wandb_mode": (str, "offline", "wandb mode: offline (default), online or disabled"),
}
"""Run-config fields of ``rl_run`` that are not settings: they name or show a run, not what it trains."""


class TrainingRunConfig(dg.Config):
    """What ``rl_run``'s run config does with its fields (generated per config file by
    :func:`training_config_class`)."""

    def settings(self) -> TrainingSettings:
        """The run's ``TrainingSettings``, every one checked as in the file, then the rules across them:
        a ``ConfigError`` names the setting. The run fields (``RUN_FIELDS``) are not settings."""
        if self.run_name and not SAFE_RUN_NAME.match(self.run_name):
            raise ConfigError(f"{WHERE} run_name {self.run_name!r} must be letters, digits, '.', '_' or '-' "
                              "(at most 100, not starting with '.'): it names a folder under data/checkpoints")
        return checked(TrainingSettings, WHERE, "training", settings_values(self, TrainingSettings),
                       named=str).check_rules(WHERE)

    def run_id(self) -> str:
        """``run_name`` when set, else a stable id of the settings (same settings: same run, resumed); the
        launch settings (``LAUNCH_SETTINGS``: how many ranks) are not part of it."""
        if self.run_name:
            return self.run_name
        settings = {k: v for k, v in self.model_dump().items() if k not in RUN_FIELDS and k not in LAUNCH_SETTINGS}
        digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:10]
        return f"rl-{self.algorithm}-s{self.seed}-{digest}"


def training_config_class(training: TrainingSettings) -> type[TrainingRunConfig]:
    """``rl_run`` run config: the ``[training]`` settings (defaults: ``training``), then ``RUN_FIELDS``."""
    return config_class("TrainingConfig", training, TRAINING_DOC, base=TrainingRunConfig, extra=RUN_FIELDS)


def resolve_base_model(base_model: str, runtime: ModelRuntime, bench: BenchmarkConfig) -> str:
    """Where ``base_model`` (a model key from the benchmark config, else a checkpoint directory) loads from."""
    entry = model_entry(base_model, bench, "rl_run config base_model")
    return model_source(entry, Path(runtime.models_dir), runtime.local_files_only).location


def rollout_engine_of(base_model: str, bench: BenchmarkConfig) -> GenerationBackend | None:
    """The vLLM engine settings of ``rollout_backend = "vllm"``: the base model's ``[models.<key>]``
    table's when that is a vLLM entry, else None (vLLM's defaults)."""
    if base_model not in bench.model_keys:
        return None
    backend = bench.model(base_model).backend
    return backend if backend.uses_engine else None


def build_rl_run(bench: BenchmarkConfig) -> dg.AssetsDefinition:
    """The ``rl_run`` asset; its run config defaults to the training settings in ``bench``."""
    TrainingConfig = training_config_class(bench.training)  # a Config class, made per config file

    @dg.asset(group_name="training", kinds={"pytorch", "duckdb"})
    def rl_run(context: dg.AssetExecutionContext, config: TrainingConfig, model_runtime: ModelRuntime,
               duckdb: DuckDBResource) -> dg.MaterializeResult:
        """Supervised warm-up, then RL against a frozen quantized reference; metrics to DuckDB."""
        return train(context, bench, config, model_runtime, duckdb)

    return rl_run


def train(context: dg.AssetExecutionContext, bench: BenchmarkConfig, config: TrainingRunConfig,
          model_runtime: ModelRuntime, duckdb: DuckDBResource) -> dg.MaterializeResult:
    """The body of ``rl_run``: in this process, or on ``nproc_per_node`` torchrun ranks."""
    if config.nproc_per_node > 1:
        config.settings()  # every setting checked before any rank starts
        return launch_ranks(context, bench, config, model_runtime, duckdb)
    return dg.MaterializeResult(metadata=train_and_record(bench, config, model_runtime, duckdb, context.log))


def train_and_record(bench: BenchmarkConfig, config: TrainingRunConfig, model_runtime: ModelRuntime,
                     duckdb: DuckDBResource, log: Log, dp: DataParallel = SINGLE,
                     report: Report | None = None) -> dict[str, Any] | None:
    """Validate, build the environments, then train and record the run (``rl.recorded_run``); the
    materialization's metadata, read back from what is stored for the run.

    ``dp`` is this process's rank: rank 0 (and the single process) logs, reports, writes TensorBoard
    and DuckDB and returns the metadata; another rank only trains and returns None."""
    settings = config.settings()  # every setting checked before any model loads
    run_id = config.run_id()
    check_report_database(duckdb.database)  # a damaged report database is named before any work
    train_env, held_out = training_environments(settings, bench.seed + settings.seed, bench.datasets)  # before a model
    validation = validation_environment(settings, bench.datasets)
    base = resolve_base_model(config.base_model, model_runtime, bench)
    rollout_engine = rollout_engine_of(config.base_model, bench)
    model_runtime.apply_threads()
    run_dir = DATA_DIR / "checkpoints" / run_id

    def train(**callbacks: Any) -> TrainingResult:
        return run_training(base, run_dir, settings, train_env, held_out, list(range(len(held_out))),
                            device=model_runtime.device, resume=config.resume, validation_env=validation, dp=dp,
                            rollout_engine=rollout_engine, evaluation=bench.eval, **callbacks)

    if not dp.is_main:
        train()
        return None
    record = TrainingRunRecord.started(run_id, base, settings, datetime.now(UTC))
    recorder = RunRecorder(duckdb.get_connection, run_id)
    stored = record_training(
        recorder, record, train, [Rejections(TRAINING_STAGE, train_env.name, train_env.rejected),
                                  Rejections(HELD_OUT_STAGE, held_out.name, held_out.rejected)],
        log, resume=config.resume, observe=lambda: Progress.of(config, run_id, settings.total_steps, duckdb, log,
                                                                 report),
        telemetry=TelemetrySampler(interval_s=model_runtime.telemetry_interval_s,
                                   device=model_runtime.torch_device()))
    with duckdb.get_connection() as conn:
        figures = training_figures(conn, duckdb.database, run_id)  # PNGs under reports/plots/training/<run_id>
    return {
        "run_id": run_id,
        "final_checkpoint": dg.MetadataValue.path(str(stored.record.final_checkpoint)),
        "reference_quantization_mode": stored.record.reference_quantization_mode,
        "final_accuracy": stored.accuracy("final"),
        "warmup_accuracy": stored.accuracy("warmup"),
        "swap_changed": stored.record.swap_changed,
        "resumed_from_step": stored.record.resumed_from_step,
        "rejected_rows": stored.record.rejected_rows,
        "evaluations": markdown_preview(stored.evaluation_summary(), rows=50),
        **figures,
    }
