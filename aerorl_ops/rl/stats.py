"""Per-step statistics of training, as plain values (one DuckDB row each)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import psutil
import torch


@dataclass(frozen=True)
class StepStats:
    step: int
    phase: str  # "warmup" (supervised, masked CE) or the RL algorithm's name
    loss: float
    reward_mean: float | None
    reward_std: float | None
    verifier_mean: float | None
    verifier_std: float | None
    grounding_mean: float | None
    grounding_std: float | None
    format_mean: float | None
    format_std: float | None
    cost_mean: float | None
    cost_std: float | None
    kl: float | None
    entropy: float | None
    clip_fraction: float | None
    response_length: float
    masked_token_fraction: float  # counted (completion text) tokens / attended tokens
    vision_token_fraction: float  # vision tokens / attended tokens
    tokens_per_s: float
    step_s: float
    grad_norm: float
    peak_memory_mb: float

    def as_record(self) -> dict[str, object]:
        return asdict(self)


def peak_memory_mb(device: torch.device) -> float:
    """Peak CUDA memory allocated on ``device``, else this process's peak resident set."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    memory = psutil.Process().memory_info()
    return float(getattr(memory, "peak_wset", memory.rss)) / 2**20
