"""The RL loss of one micro-batch, made of the functional core's terms.

    loss = policy_loss(old, new, A; clip_low, clip_high, dual_clip_c)
           + kl_coef * agg(kl_penalty(new, ref, kl_kind))          (only when the KL is a loss term)
           - entropy_coef * agg(H(new))                            (entropy bonus)
           + value_coef * value_loss(V, R, V_old; value_clip)      (only with a value head)

Every term is aggregated over the counted response tokens with the same ``agg_mode``, as verl
does. The trainer multiplies each micro-batch's loss by its ``functional.aggregation_share`` of the
minibatch, so the accumulated gradient is the one-big-batch gradient in every mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch

from aerorl_ops.rl.functional import aggregate_loss, kl_penalty, policy_loss, value_loss


class Targets(NamedTuple):
    """What the rollout fixes for every update of a step, [B, T] over response tokens."""

    old_logprob: torch.Tensor  # [B, T] log-probs under the rollout's policy (the PPO ratio's denominator)
    advantages: torch.Tensor  # [B, T]
    returns: torch.Tensor  # [B, T] the value head's targets (PPO)
    mask: torch.Tensor  # [B, T] 1.0 = a counted response token
    ref_logprob: torch.Tensor | None  # [B, T] the reference's log-probs, when the KL is a loss term
    old_values: torch.Tensor | None  # [B, T] the value head's values at the rollout (PPO)

    def rows(self, span: slice | torch.Tensor) -> Targets:
        """The targets of rows ``span``: a slice (a micro-batch) or a tensor of row indices."""
        return Targets(*(None if t is None else t[span] for t in self))


class LossStats(NamedTuple):
    """Detached statistics of one micro-batch's loss; fractions are over its counted tokens."""

    tokens: float  # counted tokens
    clip_fraction: float
    approx_kl: float  # masked mean of old - new log-prob
    dual_clip_fraction: float
    value_loss: float | None  # the aggregated clipped value loss (before value_coef)
    value_clip_fraction: float | None


@dataclass(frozen=True)
class RLLoss:
    """The module docstring's loss (settings: ``TrainingSettings``', resolved for the algorithm);
    ``kl_coef`` applies only when ``Targets.ref_logprob`` is given."""

    agg_mode: str
    clip_low: float
    clip_high: float
    dual_clip_c: float
    kl_coef: float
    kl_kind: str
    entropy_coef: float
    value_coef: float
    value_clip: float

    def __call__(self, logprob: torch.Tensor, entropy: torch.Tensor, values: torch.Tensor | None,
                 targets: Targets) -> tuple[torch.Tensor, LossStats]:
        """logprob, entropy (of the current policy), values (of the value head, or None): [B, T]
        over the same rows as ``targets``. Returns the loss [] and its :class:`LossStats`."""
        mask = targets.mask  # [B, T]
        policy = policy_loss(targets.old_logprob, logprob, targets.advantages, mask, self.clip_low, self.clip_high,
                             self.dual_clip_c, self.agg_mode)
        loss = policy.loss  # []
        if targets.ref_logprob is not None and self.kl_coef > 0:
            kl = kl_penalty(logprob, targets.ref_logprob, self.kl_kind)  # [B, T]
            loss = loss + self.kl_coef * aggregate_loss(kl, mask, self.agg_mode)
        if self.entropy_coef > 0:
            loss = loss - self.entropy_coef * aggregate_loss(entropy, mask, self.agg_mode)
        critic = None
        if values is not None:
            critic = value_loss(values, targets.returns, targets.old_values, mask, self.value_clip, self.agg_mode)
            loss = loss + self.value_coef * critic.loss
        stats = LossStats(tokens=float(mask.sum()), clip_fraction=float(policy.clipfrac),
                          approx_kl=float(policy.approx_kl), dual_clip_fraction=float(policy.dual_clipfrac),
                          value_loss=float(critic.loss.detach()) if critic else None,
                          value_clip_fraction=float(critic.clipfrac) if critic else None)
        return loss, stats


def token_weighted_sums(passes: Sequence[LossStats], name: str) -> tuple[float, float] | None:
    """(sum of statistic ``name`` x counted tokens, counted tokens) over ``passes``; None where it is absent."""
    present = [(getattr(p, name), p.tokens) for p in passes if getattr(p, name) is not None]
    if not present:
        return None
    return sum(value * weight for value, weight in present), sum(weight for _, weight in present)


def token_weighted_mean(passes: Sequence[LossStats], name: str) -> float | None:
    """The mean of statistic ``name`` over every counted token of ``passes`` (None where it is absent)."""
    sums = token_weighted_sums(passes, name)
    return sums[0] / sums[1] if sums is not None and sums[1] else None
