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
    kl: float | None  # token-mean k3 KL to the reference (None without a reference)
    entropy: float | None
    clip_fraction: float | None  # share of tokens where the PPO ratio clip binds
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

    def as_record(self) -> dict[str, object]:
        return asdict(self)


def peak_memory_mb(device: torch.device) -> float:
    """Peak CUDA memory allocated on ``device``, else this process's peak resident set."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    memory = psutil.Process().memory_info()
    return float(getattr(memory, "peak_wset", memory.rss)) / 2**20
