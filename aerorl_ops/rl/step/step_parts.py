"""The parts of an RL step the trainer (``rl.step.trainer``) passes between its phases: the rollout's
per-token scores and per-reply outcomes, one update's result, and the layout of flattened
per-token values over the response positions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from aerorl_ops.rl.step.loss import LossStats
from aerorl_ops.rl.step.sequences import SequenceBatch


class RolloutScores(NamedTuple):
    """The rollout's per-token scores, [B, L] over response tokens (0 at padding)."""

    logprob: torch.Tensor  # [B, L] the rollout policy's log-probs
    entropy: torch.Tensor  # [B, L] the rollout policy's entropies
    ref_logprob: torch.Tensor | None  # [B, L] the reference's log-probs (None without a reference)
    values: torch.Tensor | None  # [B, L] the value head's values (None without one)


class Outcomes(NamedTuple):
    """The global rollout's per-reply outcomes (every rank's rows, in global order)."""

    rewards: torch.Tensor  # [B] the environment's rewards
    correct: torch.Tensor  # [B] bool, the environment's accuracy test
    truncated: torch.Tensor  # [B] bool, cut at max_new_tokens


class Update(NamedTuple):
    """One optimizer update over a minibatch."""

    loss: float  # the (global) minibatch's aggregated loss
    value_loss: float | None  # its aggregated value loss (before value_coef), with a value head
    grad_norm: float
    skipped: bool
    passes: list[LossStats]  # one per micro-batch of this rank


def response_layout(flat: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Row-major flattened per-token values [N] -> [B, L] at the positions ``mask`` counts, 0 elsewhere
    (gradient kept). mask: [B, L], left-aligned response tokens."""
    return torch.zeros(mask.shape, dtype=flat.dtype, device=flat.device).masked_scatter(mask.bool(), flat)


def row_spans(batches: Sequence[SequenceBatch]) -> list[slice]:
    """The rows of the whole rollout that each (consecutive) micro-batch holds."""
    spans, start = [], 0
    for batch in batches:
        spans.append(slice(start, start + batch.input_ids.shape[0]))
        start = spans[-1].stop
    return spans


def response_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    return (torch.arange(width, device=lengths.device)[None, :] < lengths[:, None]).float()  # [B, width]



def on_device(batch: SequenceBatch, device: torch.device) -> SequenceBatch:
    inputs = {name: value.to(device) for name, value in batch.inputs.items()}
    return SequenceBatch(inputs, batch.completion_mask.to(device), batch.vision_mask.to(device))
