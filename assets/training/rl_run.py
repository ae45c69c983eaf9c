"""``rl_run``: warm-up then RL of a policy on a task environment, against a frozen quantized reference.

The environment (``env``, default easy-VQA) supplies training items and a fixed held-out sample
(``eval_size`` items of ``eval_split``, seed 0). Per-step metrics, evaluations (overall and per
question type, with the no-image prior and the supervised control) and the run land in DuckDB;
checkpoints under ``data/checkpoints/<run>``. Rerunning the same config resumes from the latest
checkpoint.

With ``nproc_per_node`` > 1 the run happens on that many torchrun ranks, launched through Dagster
Pipes (``assets.training.torchrun``); rank 0 then does what this step does in process: the same
:func:`train_and_record`, reported back as this asset's materialization.
"""

import hashlib
import json
import re
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import dagster as dg
import pandas as pd
from dagster_duckdb import DuckDBResource
from tqdm import tqdm

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.config.evaluation import EvalSettings
from aerorl_ops.config.training import LAUNCH_SETTINGS, TrainingSettings
from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.models.entry import GenerationBackend
from aerorl_ops.models.sources import model_source
from aerorl_ops.reporting.tensorboard import TensorBoardLogger, tensorboard_dir
from aerorl_ops.rl.config import AeroRLConfig
from aerorl_ops.rl.distributed import SINGLE, DataParallel
from aerorl_ops.rl.from_settings import rl_config_of, training_environments, training_plan_of, validation_environment
from aerorl_ops.rl.held_out import EvalResult
from aerorl_ops.rl.runtimes import REFERENCE_QUANTIZATIONS
from aerorl_ops.rl.stats import StepStats
from aerorl_ops.rl.training_record import TrainingRunRecord, training_tables
from aerorl_ops.rl.training_run import SampledEval, TrainingPlan, TrainingResult, run_training
from aerorl_ops.storage.duckdb_store import ensure_tables, replace_partitions
from aerorl_ops.storage.schema import EVAL_TABLES, TRAINING_TABLES
from aerorl_ops.telemetry import TelemetrySampler
from assets.figures import training_figures
from assets.metadata import markdown_preview
from assets.project import DATA_DIR
from assets.resources import ModelRuntime
from assets.settings_config import config_class
from assets.training.torchrun import launch_ranks

EVAL_DEFAULTS = EvalSettings()
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


class Log(Protocol):
    """Where a run's progress lines go: the step's ``context.log``, or a rank's Pipes logger."""

    def info(self, msg: str) -> Any: ...


Report = Callable[[str, dict[str, Any]], None]
"""Called with ("step", a StepStats record) or ("eval", an evaluation's summary) as they happen."""


class TrainingRunConfig(dg.Config):
    """What ``rl_run``'s run config does with its fields (generated per config file by
    :func:`training_config_class`)."""

    def rl_config(self) -> AeroRLConfig:
        if self.quant_bits not in REFERENCE_QUANTIZATIONS:
            raise ValueError(f"rl_run config quant_bits must be 4 (nf4), 8 (int8) or 16, got {self.quant_bits!r}")
        if self.run_name and not SAFE_RUN_NAME.match(self.run_name):
            raise ValueError(f"rl_run config run_name {self.run_name!r} must be letters, digits, '.', '_' or '-' "
                             "(at most 100, not starting with '.'): it names a folder under data/checkpoints")
        return rl_config_of(self)

    def plan(self, evaluation: EvalSettings = EVAL_DEFAULTS) -> TrainingPlan:
        """The plan; sampled evaluations during training use ``evaluation`` (the config's ``[eval]``)."""
        return training_plan_of(self, evaluation)

    def run_id(self) -> str:
        """``run_name`` when set, else a stable id of the settings (same settings: same run, resumed); the
        launch settings (``LAUNCH_SETTINGS``: how many ranks) are not part of it."""
        if self.run_name:
            return self.run_name
        settings = {k: v for k, v in self.model_dump().items() if k not in RUN_FIELDS and k not in LAUNCH_SETTINGS}
        digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:10]
        return f"rl-{self.algorithm}-s{self.seed}-{digest}"

    def environments(self, seed: int, datasets: Sequence[DatasetSettings] = ()) -> tuple[TaskEnv, TaskEnv]:
        """The training environment and the held-out one (a fixed sample of ``eval_size`` items);
        ``env`` may name one of ``datasets`` (the config's ``[datasets.<name>]``)."""
        return training_environments(self, seed, datasets)


def training_config_class(training: TrainingSettings) -> type[TrainingRunConfig]:
    """``rl_run`` run config: the ``[training]`` settings (defaults: ``training``), then ``RUN_FIELDS``."""
    return config_class("TrainingConfig", training, TRAINING_DOC, base=TrainingRunConfig, extra=RUN_FIELDS)


def resolve_base_model(base_model: str, runtime: ModelRuntime, bench: BenchmarkConfig) -> str:
    """A model key from the benchmark config, else an existing checkpoint directory."""
    if base_model in bench.model_keys:
        return model_source(bench.model(base_model), Path(runtime.models_dir), runtime.local_files_only).location
    if Path(base_model).expanduser().is_dir():
        return str(Path(base_model).expanduser().resolve())
    raise dg.Failure(f"rl_run config base_model={base_model!r} is neither a model key in {bench.path} "
                     f"({', '.join(bench.model_keys)}) nor a checkpoint directory")


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


def progress_postfix(stats: StepStats) -> dict[str, str]:
    """What the progress bar shows after a step: phase, loss, and for RL reward, accuracy and KL."""
    shown = {"phase": stats.phase, "loss": f"{stats.loss:.3f}"}
    for name in ("reward_mean", "accuracy", "kl"):
        value = getattr(stats, name)
        if value is not None:
            shown[name.removesuffix("_mean")] = f"{value:.3f}"
    return shown


def evaluation_summary(result: TrainingResult) -> pd.DataFrame:
    rows = []
    for e in result.evals:
        row = {"step": e.step, "phase": e.phase, "wall_s": round(e.wall_s, 1), "accuracy": round(e.accuracy, 4),
               "stderr": round(e.report.overall.standard_error, 4), "n": e.n}
        row.update({kind: round(value.accuracy, 4) for kind, value in e.report.by_type.items()})
        rows.append(row)
    return pd.DataFrame(rows)


def train(context: dg.AssetExecutionContext, bench: BenchmarkConfig, config: TrainingRunConfig,
          model_runtime: ModelRuntime, duckdb: DuckDBResource) -> dg.MaterializeResult:
    """The body of ``rl_run``: in this process, or on ``nproc_per_node`` torchrun ranks."""
    config.rl_config()  # validates every setting before any model loads or rank starts
    if config.nproc_per_node > 1:
        return launch_ranks(context, bench, config, model_runtime, duckdb)
    return dg.MaterializeResult(metadata=train_and_record(bench, config, model_runtime, duckdb, context.log))


def train_and_record(bench: BenchmarkConfig, config: TrainingRunConfig, model_runtime: ModelRuntime,
                     duckdb: DuckDBResource, log: Log, dp: DataParallel = SINGLE,
                     report: Report | None = None) -> dict[str, Any] | None:
    """Validate, build the environments, train, write the run's tables; the materialization's metadata.

    ``dp`` is this process's rank: rank 0 (and the single process) logs, reports, writes TensorBoard
    and DuckDB and returns the metadata; another rank only trains and returns None."""
    rl_config = config.rl_config()  # validates every setting before any model loads
    plan = config.plan(bench.eval)
    run_id = config.run_id()
    base = resolve_base_model(config.base_model, model_runtime, bench)
    rollout_engine = rollout_engine_of(config.base_model, bench)
    model_runtime.apply_threads()
    train_env, held_out = config.environments(bench.seed + config.seed, bench.datasets)
    validation = validation_environment(config, bench.datasets)
    run_dir = DATA_DIR / "checkpoints" / run_id

    def run(**callbacks: Any) -> TrainingResult:
        return run_training(base, run_dir, rl_config, plan, train_env, held_out, list(range(len(held_out))),
                            device=model_runtime.device, resume=config.resume, validation_env=validation, dp=dp,
                            rollout_engine=rollout_engine, **callbacks)

    if not dp.is_main:
        run()
        return None
    board = TensorBoardLogger(tensorboard_dir(Path(duckdb.database).parent, run_id),  # beside the database
                              wandb_project=config.wandb_project or None, wandb_mode=config.wandb_mode,
                              run_name=run_id, config=config.model_dump())
    started, clock = datetime.now(UTC), time.perf_counter()
    bar = tqdm(total=plan.total_steps, desc=f"training {run_id}", unit="step", disable=not config.progress_bar)

    def on_step(stats: StepStats) -> None:
        board.log_step(stats)
        bar.update(stats.step - bar.n)
        bar.set_postfix(progress_postfix(stats))
        rate = stats.step / max(time.perf_counter() - clock, 1e-9)
        log.info(f"step {stats.step}/{plan.total_steps} ({stats.phase}) loss {stats.loss:.4f} "
                 f"reward {stats.reward_mean} accuracy {stats.accuracy} kl {stats.kl}; "
                 f"ETA {(plan.total_steps - stats.step) / rate:.0f} s")
        if report:
            report("step", stats.as_record())

    def on_eval(evaluation: EvalResult) -> None:
        board.log_eval(evaluation)
        overall = evaluation.report.overall
        log.info(f"eval at step {evaluation.step} ({evaluation.phase}): accuracy {overall.accuracy:.4f} "
                 f"± {overall.standard_error:.4f} (n={overall.n})")
        if report:
            report("eval", {"step": evaluation.step, "phase": evaluation.phase, "accuracy": overall.accuracy,
                            "stderr": overall.standard_error, "n": overall.n})

    def on_sampled(sampled: SampledEval) -> None:
        board.log_eval(sampled.outcome, step=sampled.step)
        log.info(f"sampled eval at step {sampled.step} on {sampled.env}/{sampled.split}: "
                 + ", ".join(f"{name} {value:.4f}" for name, value in sampled.outcome.scalars().items()
                             if name.count("/") == 2 and name.endswith("/accuracy")))

    with TelemetrySampler(interval_s=model_runtime.telemetry_interval_s,
                          device=model_runtime.torch_device()) as sampler:
        result = run(on_step=on_step, on_eval=on_eval, on_sampled=on_sampled)
    bar.close()
    board.close()
    settings = {k: v for k, v in config.model_dump().items() if k not in RUN_FIELDS}
    record = TrainingRunRecord.of(run_id, base, config.env, rl_config, plan, result, settings, started,
                                  datetime.now(UTC), sampler.summary())
    with duckdb.get_connection() as conn:
        ensure_tables(conn, TRAINING_TABLES + EVAL_TABLES)
        replace_partitions(conn, training_tables(run_id, result, record))
        figures = training_figures(conn, duckdb.database, run_id)  # PNGs under reports/plots/training/<run_id>
    final, warmup = result.eval_of("final"), result.eval_of("warmup")
    return {
        "run_id": run_id,
        "final_checkpoint": dg.MetadataValue.path(str(result.final_checkpoint)),
        "reference_quantization_mode": record.reference_quantization_mode,
        "final_accuracy": final.accuracy if final else None,
        "warmup_accuracy": warmup.accuracy if warmup else None,
        "swap_changed": record.swap_changed,
        "evaluations": markdown_preview(evaluation_summary(result), rows=50),
        **figures,
    }
