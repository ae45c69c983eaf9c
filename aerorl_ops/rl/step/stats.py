"""Per-step statistics of training, as plain values (one DuckDB row each)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import psutil
import torch

from aerorl_ops.rl.runtime.distributed import DataParallel
from aerorl_ops.rl.step.sequences import SequenceBatch
from aerorl_ops.rl.step.step_parts import Outcomes


@dataclass(frozen=True)
class StepStats:
    step: int
    phase: str  # "warmup" (supervised), "control" (supervised control) or the RL algorithm's name
    loss: float
    reward_mean: float | None  # the environment's reward over the rollout (RL steps)
    reward_std: float | None
    accuracy: float | None  # share of rollout replies the environment marks correct
    kl: float | None  # token-mean KL (the run's kl_kind) of the rollout's policy to the reference (None without one)
    entropy: float | None  # token-mean entropy of the rollout's policy over response tokens
    clip_fraction: float | None  # share of tokens where the PPO ratio clip binds (over every update of the step)
    response_clip_ratio: float | None  # share of replies cut at max_new_tokens
    response_length: float
    masked_token_fraction: float  # counted (completion text) tokens / attended tokens
    vision_token_fraction: float  # vision tokens / attended tokens
    tokens_per_s: float
    step_s: float
    grad_norm: float
    learning_rate: float
    skipped: bool  # the NaN/inf guard skipped this step's update
    peak_memory_mb: float
    curriculum_stage: int | None = None  # 0-based curriculum stage of the step's batch (None = natural mix)
    episodes_seen: int | None = None  # training items (supervised) or sampled replies (RL) up to this step
    approx_kl: float | None = None  # RL: token-mean of old - new log-prob over every update of the step
    dual_clip_fraction: float | None = None  # RL: share of tokens where the dual clip binds (every update)
    value_loss: float | None = None  # PPO: the clipped value loss (before value_coef), mean over updates
    value_clip_fraction: float | None = None  # PPO: share of tokens where the value clip binds (every update)
    explained_variance: float | None = None  # PPO: 1 - Var(returns - values) / Var(returns) at the rollout
    groups_sampled: int | None = None  # RL: prompt groups sampled over every sampling round (rl.step.rollout_rounds)
    groups_kept: int | None = None  # RL: informative groups trained on (all of them without dynamic sampling)
    groups_dropped: int | None = None  # RL, dynamic sampling: groups whose rewards were all equal, left out
    groups_filled: int | None = None  # RL, dynamic sampling: uninformative groups trained on (rounds ran out)
    sampling_rounds: int | None = None  # RL: rollout rounds of the step
    padded_token_fraction: float | None = None  # padding / all positions of the step's micro-batches
    behaviour_step: int | None = None  # RL: the step after which the weights that sampled its replies were taken

    def as_record(self) -> dict[str, object]:
        return asdict(self)


def peak_memory_mb(device: torch.device) -> float:
    """Peak CUDA memory allocated on ``device``, else this process's peak resident set."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    memory = psutil.Process().memory_info()
    return float(getattr(memory, "peak_wset", memory.rss)) / 2**20


@dataclass(frozen=True)
class StepOutcome:
    """What a step's updates came to, before its token counts: the loss, the replies' outcomes (None for a
    supervised step), the algorithm's extra statistics, and the optimizer's side."""

    step: int
    phase: str
    loss: float
    outcomes: Outcomes | None
    extra: dict[str, float | None]
    grad_norm: float
    learning_rate: float
    skipped: bool


def step_stats(dp: DataParallel, device: torch.device, outcome: StepOutcome, batches: Sequence[SequenceBatch],
               started: float) -> StepStats:
    """The step's statistics over every rank's ``batches``; the times and memory are this rank's."""
    elapsed = time.perf_counter() - started
    attended, padded, counted, vision, rows = dp.sum([
        sum(float(b.inputs["attention_mask"].sum()) for b in batches),
        sum(float(b.inputs["attention_mask"].numel()) for b in batches),
        sum(float(b.completion_mask.sum()) for b in batches),
        sum(float((b.vision_mask & b.inputs["attention_mask"].bool()).sum()) for b in batches),
        sum(b.input_ids.shape[0] for b in batches)])
    outcomes = outcome.outcomes
    truncated = outcomes.truncated.tolist() if outcomes is not None else []
    return StepStats(
        step=outcome.step, phase=outcome.phase, loss=outcome.loss,
        reward_mean=float(outcomes.rewards.mean()) if outcomes is not None else None,
        reward_std=float(outcomes.rewards.std(unbiased=False)) if outcomes is not None else None,
        accuracy=float(outcomes.correct.float().mean()) if outcomes is not None else None,
        **{"kl": None, "entropy": None, "clip_fraction": None, **outcome.extra},
        response_clip_ratio=sum(truncated) / len(truncated) if outcomes is not None else None,
        response_length=counted / rows if rows else 0.0,
        masked_token_fraction=counted / attended if attended else 0.0,
        vision_token_fraction=vision / attended if attended else 0.0,
        tokens_per_s=attended / elapsed if elapsed > 0 else 0.0,
        padded_token_fraction=1.0 - attended / padded if padded else 0.0,
        step_s=elapsed, grad_norm=outcome.grad_norm, learning_rate=outcome.learning_rate, skipped=outcome.skipped,
        peak_memory_mb=peak_memory_mb(device),
    )
