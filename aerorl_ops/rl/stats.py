"""Per-step statistics of training, as plain values (one DuckDB row each)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import psutil
import torch


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
    groups_sampled: int | None = None  # RL: prompt groups sampled over every sampling round (rl.step_rollout)
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
