"""Per-step statistics of training, as plain values: a ``StepStats`` (``storage.training_schema``, one
``training_steps`` row each) from a step's outcome and batches. On a mixture (``envs.mixture``) an RL step's
row also holds the rollout's accuracy per source dataset (``accuracy_by_source``); on one dataset, None."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

import psutil
import torch

from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.eval_runner.held_out import source_accuracy
from aerorl_ops.losses import masked_mean
from aerorl_ops.rl.runtime.distributed import DataParallel
from aerorl_ops.rl.step.loss import LossStats, token_weighted_sums
from aerorl_ops.rl.step.rollout_rounds import GroupCounts
from aerorl_ops.rl.step.sequences import SequenceBatch
from aerorl_ops.rl.step.step_parts import Outcomes
from aerorl_ops.rows.task_item import TaskItem
from aerorl_ops.storage.training_schema import StepStats


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
    extra: dict[str, float | str | None]
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


def token_mean(dp: DataParallel, passes: Sequence[LossStats], name: str) -> float | None:
    """Statistic ``name`` averaged over every counted token of every rank's ``passes``."""
    sums = token_weighted_sums(passes, name)
    if sums is None:
        return None
    total, tokens = dp.sum(sums)
    return total / tokens if tokens else None


def accuracy_by_source(env: TaskEnv, items: Sequence[TaskItem], correct: torch.Tensor) -> str | None:
    """``training_steps.accuracy_by_source`` of a rollout of ``env``: JSON ``{source: {"accuracy", "n"}}`` over
    the replies to ``items`` [B] (``correct`` [B] bool), every part of a mixture listed in order (accuracy
    null for one without a reply); None when ``env`` is no mixture."""
    by_source = source_accuracy(env, items, correct.tolist())
    if not by_source:
        return None
    return json.dumps({source: {"accuracy": value.accuracy if value.n else None, "n": value.n}
                       for source, value in by_source.items()})


def rl_step_extra(dp: DataParallel, kl: torch.Tensor | None, mask: torch.Tensor, entropy: torch.Tensor,
                  passes: Sequence[LossStats], groups: GroupCounts, behaviour_step: int,
                  by_source: str | None = None) -> dict[str, float | str | None]:
    """An RL step's own statistics: the rollout's token-mean KL and entropy over ``mask`` [B, L], the
    updates' token-mean clip and KL statistics over every rank, the sampling rounds' group counts, which
    weights sampled the step, and its accuracy per source (``accuracy_by_source``; None on one dataset)."""
    return {"kl": float(masked_mean(kl, mask)) if kl is not None else None,
            "entropy": float(masked_mean(entropy, mask)),
            **{name: token_mean(dp, passes, name) for name in (
                "clip_fraction", "approx_kl", "dual_clip_fraction", "value_clip_fraction")},
            "groups_sampled": groups.sampled, "groups_kept": groups.kept, "groups_dropped": groups.dropped,
            "groups_filled": groups.filled, "sampling_rounds": groups.rounds,
            "behaviour_step": behaviour_step, "accuracy_by_source": by_source}
