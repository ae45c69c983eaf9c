"""``rl_run``: masked-loss RL of a policy against a frozen quantized reference.

A short supervised warm-up teaches the answer format, then GRPO (or REINFORCE++) trains
against the warm-up model, loaded through bitsandbytes. Per-step metrics, evaluations and the
run land in DuckDB; checkpoints under ``data/checkpoints/<run>``. Rerunning the same config
resumes from the latest checkpoint.
"""

import hashlib
import json
import re
import time
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pandas as pd
import pyarrow as pa
from dagster_duckdb import DuckDBResource
from tqdm import tqdm

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.models.sources import model_source
from aerorl_ops.rl.config import AeroRLConfig
from aerorl_ops.rl.runtimes import REFERENCE_QUANTIZATIONS
from aerorl_ops.rl.stats import StepStats
from aerorl_ops.rl.training_run import EvalResult, TrainingPlan, TrainingRunRecord, run_training
from aerorl_ops.rows import synthetic_chartqa_rows, synthetic_docvqa_rows
from aerorl_ops.storage.duckdb_store import PartitionWrite, ensure_tables, replace_partitions
from aerorl_ops.storage.schema import TRAINING_EVALS, TRAINING_RUNS, TRAINING_STEPS, TRAINING_TABLES
from aerorl_ops.telemetry import TelemetrySampler
from assets.metadata import markdown_preview
from assets.project import DATA_DIR
from assets.resources import ModelRuntime
from assets.settings_config import config_class

TRAIN_SEED_OFFSET = 1000
SAFE_RUN_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}$")
EVAL_SEED_OFFSET = 2000


TRAINING_DOC = """Training settings of this run; the defaults are the config file's [training].

base_model: a model key from the config file, or a checkpoint directory. steps: RL steps after
``warmup_steps`` supervised steps. quant_bits: reference as nf4 (4), int8 (8) or unquantized (16).
Rows are synthetic, seeded apart from the benchmark's rows (train: seed+1000, held-out: seed+2000),
so the benchmark never scores training rows."""
RUN_FIELDS = {
    "run_name": (str, "", "run id (default: derived from the settings; the same settings resume)"),
    "resume": (bool, True, "resume from this run's latest checkpoint when there is one"),
    "progress_bar": (bool, False, "show a progress bar on the terminal"),
}
"""Run-config fields of ``rl_run`` that are not settings: they name or show a run, not what it trains."""


class TrainingRunConfig(dg.Config):
    """What ``rl_run``'s run config does with its fields (generated per config file by
    :func:`training_config_class`)."""

    def rl_config(self) -> AeroRLConfig:
        if self.quant_bits not in REFERENCE_QUANTIZATIONS:
            raise ValueError(f"rl_run config quant_bits must be 4 (nf4), 8 (int8) or 16, got {self.quant_bits!r}")
        if self.run_name and not SAFE_RUN_NAME.match(self.run_name):
            raise ValueError(f"rl_run config run_name {self.run_name!r} must be letters, digits, '.', '_' or '-' "
                             "(at most 100, not starting with '.'): it names a folder under data/checkpoints")
        config = AeroRLConfig(quant_ref_bits=self.quant_bits, algorithm=self.algorithm, group_size=self.group_size,
                              learning_rate=self.learning_rate, kl_coef=self.kl_coef, seed=self.seed,
                              max_new_tokens=self.max_new_tokens)
        config.validate()
        return config

    def plan(self) -> TrainingPlan:
        return TrainingPlan(warmup_steps=self.warmup_steps, warmup_learning_rate=self.warmup_learning_rate,
                            rl_steps=self.steps, prompts_per_step=self.prompts_per_step,
                            eval_interval=self.eval_interval, checkpoint_interval=self.checkpoint_interval)

    def run_id(self) -> str:
        """``run_name`` when set, else a stable id of the settings (same settings: same run, resumed)."""
        if self.run_name:
            return self.run_name
        settings = {k: v for k, v in self.model_dump().items() if k not in ("run_name", "resume", "progress_bar")}
        digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:10]
        return f"rl-{self.algorithm}-s{self.seed}-{digest}"


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


def training_tables(run_id: str, config: TrainingRunConfig, steps: list[StepStats], evals: list[EvalResult],
                    run_record: TrainingRunRecord) -> list[PartitionWrite]:
    latest_steps = {s.step: s for s in steps}  # a resumed run re-records steps after its checkpoint
    step_rows = pd.DataFrame([{"run_id": run_id, **s.as_record()} for _, s in sorted(latest_steps.items())],
                             columns=TRAINING_STEPS.column_names)
    eval_rows = pd.DataFrame([{"run_id": run_id, "step": e.step, "phase": e.phase, "reward_mean": e.reward_mean,
                               **{f"{k}_mean": v for k, v in e.component_means.items()}, "samples": e.samples}
                              for e in evals], columns=TRAINING_EVALS.column_names)
    key = {"run_id": run_id}
    return [
        PartitionWrite(TRAINING_RUNS, key, TRAINING_RUNS.rows([run_record])),
        PartitionWrite(TRAINING_STEPS, key, pa.Table.from_pandas(step_rows, preserve_index=False)),
        PartitionWrite(TRAINING_EVALS, key, pa.Table.from_pandas(eval_rows, preserve_index=False)),
    ]


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
    """The body of ``rl_run``: validate, build the rows, train, write the run's tables."""
    rl_config = config.rl_config()  # validates every setting before any model loads
    plan = config.plan()
    run_id = config.run_id()
    base = resolve_base_model(config.base_model, model_runtime, bench)
    model_runtime.apply_threads()
    seed = bench.seed + config.seed
    half = config.train_rows // 2
    train_rows = (synthetic_docvqa_rows(half, seed + TRAIN_SEED_OFFSET, "train")
                  + synthetic_chartqa_rows(config.train_rows - half, seed + TRAIN_SEED_OFFSET, "train"))
    held_out = (synthetic_docvqa_rows(config.eval_rows // 2, seed + EVAL_SEED_OFFSET, "heldout")
                + synthetic_chartqa_rows(config.eval_rows - config.eval_rows // 2, seed + EVAL_SEED_OFFSET, "heldout"))
    run_dir = DATA_DIR / "checkpoints" / run_id
    started, clock = datetime.now(UTC), time.perf_counter()

    bar = tqdm(total=plan.total_steps, desc=f"training {run_id}", unit="step", disable=not config.progress_bar)

    def on_step(stats: StepStats) -> None:
        bar.update(stats.step - bar.n)
        bar.set_postfix(phase=stats.phase, loss=f"{stats.loss:.3f}")
        rate = stats.step / max(time.perf_counter() - clock, 1e-9)
        context.log.info(f"step {stats.step}/{plan.total_steps} ({stats.phase}) loss {stats.loss:.4f} "
                         f"reward {stats.reward_mean} kl {stats.kl}; "
                         f"ETA {(plan.total_steps - stats.step) / rate:.0f} s")

    def on_eval(evaluation: EvalResult) -> None:
        context.log.info(f"eval at step {evaluation.step} ({evaluation.phase}): reward {evaluation.reward_mean:.4f}")

    with TelemetrySampler(interval_s=model_runtime.telemetry_interval_s,
                          device=model_runtime.torch_device()) as sampler:
        result = run_training(base, run_dir, rl_config, plan, train_rows, held_out, bench.rewards,
                              device=model_runtime.device, on_step=on_step, on_eval=on_eval, resume=config.resume)
    bar.close()
    run_record = TrainingRunRecord.of(run_id, base, rl_config, plan, result, config.model_dump(), started,
                                      datetime.now(UTC), sampler.summary())
    with duckdb.get_connection() as conn:
        ensure_tables(conn, TRAINING_TABLES)
        replace_partitions(conn, training_tables(run_id, config, result.steps, result.evals, run_record))
    evals = pd.DataFrame([{"step": e.step, "phase": e.phase, "reward_mean": round(e.reward_mean, 4),
                           **{k: round(v, 4) for k, v in e.component_means.items()}} for e in result.evals])
    warmup = next((e.reward_mean for e in result.evals if e.phase == "warmup"), None)
    return dg.MaterializeResult(metadata={
        "run_id": run_id,
        "final_checkpoint": dg.MetadataValue.path(str(result.final_checkpoint)),
        "reference_quantization_mode": run_record.reference_quantization_mode,
        "final_reward": result.evals[-1].reward_mean,
        "warmup_reward": warmup,
        "evaluations": markdown_preview(evals, rows=50),
    })
