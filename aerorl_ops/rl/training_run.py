"""A whole training run: supervised warm-up, then RL against a frozen quantized reference.

Algorithm:
1. evaluate the base policy on held-out rows (step 0);
2. ``warmup_steps`` of masked cross-entropy on ``{"answer": ...}`` targets (vision and prompt
   tokens excluded) so the policy emits the answer format;
3. save the warm-up checkpoint; the frozen reference is loaded from it, quantized as
   configured (nf4/int8/none) — KL is measured to the policy RL started from;
4. ``rl_steps`` of the configured algorithm (GRPO or REINFORCE++), rewards from the reward
   stack, evaluating every ``eval_interval`` steps and at the end;
5. checkpoints every ``checkpoint_interval`` steps; a rerun resumes from the latest one.

Steps are numbered globally (warm-up steps first). Evaluations use greedy decoding.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

import pyarrow as pa

from aerorl_ops.config.generation import GenerationSettings
from aerorl_ops.config.rewards import REWARD_COMPONENT_NAMES, RewardSettings
from aerorl_ops.config.training import TRAINING_DEFAULTS as DEFAULTS
from aerorl_ops.generation.batched import generate_rows
from aerorl_ops.generation.records import generations_table
from aerorl_ops.models.loading import LoadedVLM, ModelSource
from aerorl_ops.rl.checkpoint import latest_checkpoint, load_checkpoint_state, save_checkpoint
from aerorl_ops.rl.config import AeroRLConfig
from aerorl_ops.rl.runtimes import REFERENCE_QUANTIZATIONS, wrap_vlm_for_rl
from aerorl_ops.rl.stats import StepStats
from aerorl_ops.rl.trainer import AeroRLTrainer
from aerorl_ops.rows.row import Row
from aerorl_ops.scoring.partition_scores import reward_stack_for, score_generations
from aerorl_ops.telemetry import TelemetrySummary

WARMUP_DIR = "warmup"


@dataclass(frozen=True)
class TrainingPlan:
    """How many steps of each phase, and how often to evaluate and checkpoint. Defaults are the
    pipeline's training settings (``config.training.TrainingSettings``)."""

    warmup_steps: int = DEFAULTS.warmup_steps
    warmup_batch_size: int = 8
    warmup_learning_rate: float = DEFAULTS.warmup_learning_rate
    rl_steps: int = DEFAULTS.steps
    prompts_per_step: int = DEFAULTS.prompts_per_step
    eval_interval: int = DEFAULTS.eval_interval
    checkpoint_interval: int = DEFAULTS.checkpoint_interval

    def __post_init__(self) -> None:
        for name in ("warmup_batch_size", "prompts_per_step", "eval_interval", "checkpoint_interval"):
            if getattr(self, name) < 1:
                raise ValueError(f"TrainingPlan.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("warmup_steps", "rl_steps"):
            if getattr(self, name) < 0:
                raise ValueError(f"TrainingPlan.{name} must be >= 0, got {getattr(self, name)}")
        if self.warmup_learning_rate <= 0:
            raise ValueError(f"TrainingPlan.warmup_learning_rate must be > 0, got {self.warmup_learning_rate}")

    @property
    def total_steps(self) -> int:
        return self.warmup_steps + self.rl_steps


@dataclass(frozen=True)
class EvalResult:
    step: int
    phase: str  # "base", "warmup", "rl" or "final"
    reward_mean: float
    component_means: dict[str, float]
    samples: int


@dataclass
class TrainingResult:
    run_dir: Path
    final_checkpoint: Path
    reference_source: str
    steps: list[StepStats] = field(default_factory=list)
    evals: list[EvalResult] = field(default_factory=list)
    resumed_from_step: int = 0


@dataclass(frozen=True)
class TrainingRunRecord:
    """One ``training_runs`` row (the columns of ``aerorl_ops.storage.schema.TRAINING_RUNS``, in order)."""

    run_id: str
    base_model: str
    algorithm: str
    quant_ref_bits: int
    reference_quantization_mode: str
    reference_source: str
    final_checkpoint: str
    steps: int
    resumed_from_step: int
    config: str  # JSON: {"training": the run's settings, "aerorl": the AeroRLConfig}
    started_at: datetime
    finished_at: datetime
    telemetry: str  # JSON: TelemetrySummary.as_record() over the whole run

    @classmethod
    def of(cls, run_id: str, base_model: str, config: AeroRLConfig, plan: TrainingPlan, result: TrainingResult,
           settings: Mapping[str, object], started_at: datetime, finished_at: datetime,
           telemetry: TelemetrySummary) -> TrainingRunRecord:
        """The record of a finished run; ``settings`` are the run's own settings (the asset's config)."""
        return cls(
            run_id=run_id, base_model=base_model, algorithm=config.algorithm, quant_ref_bits=config.quant_ref_bits,
            reference_quantization_mode=REFERENCE_QUANTIZATIONS[config.quant_ref_bits].mode,
            reference_source=result.reference_source, final_checkpoint=str(result.final_checkpoint),
            steps=plan.total_steps, resumed_from_step=result.resumed_from_step,
            config=json.dumps({"training": dict(settings), "aerorl": asdict(config)}),
            started_at=started_at, finished_at=finished_at, telemetry=json.dumps(telemetry.as_record()),
        )


def evaluate_policy(loaded: LoadedVLM, rows: Sequence[Row], rewards: RewardSettings, max_new_tokens: int,
                    step: int, phase: str) -> EvalResult:
    """Greedy answers on held-out ``rows``, scored by the reward stack (latency counted as 0)."""
    was_training = loaded.model.training
    loaded.model.eval()
    samples = generate_rows(loaded, rows, batch_size=8, settings=GenerationSettings(max_new_tokens=max_new_tokens))
    loaded.model.train(was_training)
    table = generations_table(rows, samples)
    # Wall-clock latency depends on machine load, not on the policy: held-out rewards ignore it.
    table = table.set_column(table.schema.get_field_index("latency_ms"), "latency_ms",
                             pa.array([0.0] * table.num_rows, pa.float64()))
    scores = score_generations(table, rewards).to_pandas()
    return EvalResult(step, phase, float(scores["total_reward"].mean()),
                      {name: float(scores[name].mean()) for name in REWARD_COMPONENT_NAMES}, len(rows))


def cyclic_slice(rows: Sequence[Row], index: int, size: int) -> list[Row]:
    """The ``index``-th window of ``size`` rows, wrapping around: deterministic data order."""
    return [rows[(index * size + offset) % len(rows)] for offset in range(size)]


def run_training(base_model: str, run_dir: Path, config: AeroRLConfig, plan: TrainingPlan,
                 train_rows: Sequence[Row], eval_rows: Sequence[Row], rewards: RewardSettings,
                 device: str = "auto", on_step: Callable[[StepStats], None] | None = None,
                 on_eval: Callable[[EvalResult], None] | None = None, resume: bool = True) -> TrainingResult:
    """Warm-up then RL, as described in the module docstring. Resumes from ``run_dir`` when it
    holds a checkpoint and ``resume`` is true."""
    if not train_rows or not eval_rows:
        raise ValueError("training needs at least one training row and one held-out row")
    run_dir = Path(run_dir)
    checkpoint = latest_checkpoint(run_dir) if resume else None
    state = load_checkpoint_state(checkpoint) if checkpoint else None
    policy_source = str(checkpoint) if checkpoint else base_model
    policy, reference = wrap_vlm_for_rl(policy_source, config, device=device)
    trainer = AeroRLTrainer(config, policy, None, reward_stack_for(rewards))
    result = TrainingResult(run_dir, final_checkpoint=run_dir, reference_source="")
    if state is not None:
        trainer.state.step = state.step
        trainer.optimizer.load_state_dict(state.optimizer)
        result.resumed_from_step = state.step
        result.reference_source = state.reference_source

    def record_eval(phase: str) -> None:
        evaluation = evaluate_policy(policy.loaded, eval_rows, rewards, config.max_new_tokens, trainer.state.step,
                                     phase)
        result.evals.append(evaluation)
        if on_eval:
            on_eval(evaluation)

    def record_step(stats: StepStats) -> None:
        result.steps.append(stats)
        if on_step:
            on_step(stats)
        if trainer.state.step % plan.checkpoint_interval == 0:
            save_checkpoint(run_dir / f"step-{trainer.state.step}", policy.loaded, trainer.optimizer,
                            trainer.state.step, result.reference_source)

    trainer.on_train_start()
    if trainer.state.step == 0:
        record_eval("base")
    if trainer.state.step < plan.warmup_steps:
        _set_learning_rate(trainer, plan.warmup_learning_rate)
        while trainer.state.step < plan.warmup_steps:
            record_step(trainer.supervised_step(cyclic_slice(train_rows, trainer.state.step,
                                                             plan.warmup_batch_size)))
        warmup_dir = save_checkpoint(run_dir / WARMUP_DIR, policy.loaded, trainer.optimizer, trainer.state.step,
                                     str(run_dir / WARMUP_DIR))
        result.reference_source = str(warmup_dir)
        record_eval("warmup")
    elif not result.reference_source:
        result.reference_source = base_model if plan.warmup_steps == 0 else str(run_dir / WARMUP_DIR)
    if plan.rl_steps:
        _set_learning_rate(trainer, config.learning_rate)
        reference.source = ModelSource(result.reference_source, local_files_only=True)
        reference.model_name_or_path = result.reference_source
        trainer.reference = reference
        while trainer.state.step < plan.total_steps:
            rl_index = trainer.state.step - plan.warmup_steps
            record_step(trainer.rl_step(cyclic_slice(train_rows, rl_index, plan.prompts_per_step)))
            if (rl_index + 1) % plan.eval_interval == 0 and trainer.state.step < plan.total_steps:
                record_eval("rl")
    final = save_checkpoint(run_dir / f"step-{trainer.state.step}", policy.loaded, trainer.optimizer,
                            trainer.state.step, result.reference_source)
    result.final_checkpoint = final
    record_eval("final")
    trainer.on_train_end()
    return result


def _set_learning_rate(trainer: AeroRLTrainer, learning_rate: float) -> None:
    for group in trainer.optimizer.param_groups:
        group["lr"] = learning_rate
