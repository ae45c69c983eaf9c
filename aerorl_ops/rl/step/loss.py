"""The RL loss of one micro-batch, made of the functional core's terms.

    loss = policy term (the policy loss registered as policy_loss: rl.core.registry)
           + kl_coef * agg(kl_penalty(new, ref, kl_kind))          (only when the KL is a loss term)
           - entropy_coef * agg(H(new))                            (entropy bonus)
           + value_coef * value_loss(V, R, V_old; value_clip)      (only with a value head)

Every term is aggregated over the counted response tokens with the same ``agg_mode``, as verl
does, but the policy terms that keep their own (verl's; their registered ``aggregation``): SAPO's is
seq-mean-token-mean, GMPO's a mean over rows. Each micro-batch's terms are weighted by their share of the minibatch
(:meth:`RLLoss.shares`: ``functional.aggregation_share`` of their aggregation, ``row_share`` for
GMPO's), so the accumulated gradient is the one-big-batch gradient in every mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch

from aerorl_ops.config.training import Recipe
from aerorl_ops.rl.core.functional import PolicyLoss, aggregate_loss, aggregation_share, kl_penalty, value_loss
from aerorl_ops.rl.core.policy_losses import row_share  # with functional, every policy loss is registered
from aerorl_ops.rl.core.registry import IS_WEIGHT, POLICY_LOSS_REGISTRY, ROWS, registered_policy_loss


class Targets(NamedTuple):
    """What the rollout fixes for every update of a step, [B, T] over response tokens."""

    old_logprob: torch.Tensor  # [B, T] log-probs under the rollout's policy (the PPO ratio's denominator)
    advantages: torch.Tensor  # [B, T]
    returns: torch.Tensor  # [B, T] the value head's targets (PPO)
    mask: torch.Tensor  # [B, T] 1.0 = a counted response token
    ref_logprob: torch.Tensor | None  # [B, T] the reference's log-probs, when the KL is a loss term
    old_values: torch.Tensor | None  # [B, T] the value head's values at the rollout (PPO)
    is_weight: torch.Tensor | None = None  # [B, T] one_step_off with rollout_is: the truncated importance weight

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


class LossShares(NamedTuple):
    """A micro-batch's weight in its minibatch's loss: of the policy term, and of the other terms."""

    policy: float
    other: float


class PartLoss(NamedTuple):
    """One micro-batch's contribution to its minibatch's loss (already weighted by its shares)."""

    weighted: torch.Tensor  # [] differentiable: backward() accumulates the minibatch's gradient
    value: float  # its value, as a Python float


WHOLE = LossShares(1.0, 1.0)
"""The shares of a micro-batch that is its whole minibatch."""


@dataclass(frozen=True)
class RLLoss:
    """The module docstring's loss (settings: a ``Recipe``'s); ``kl_coef`` applies only when
    ``Targets.ref_logprob`` is given. Each field a registered policy loss takes is passed to it by name."""

    agg_mode: str
    clip_low: float
    clip_high: float
    dual_clip_c: float
    kl_coef: float
    kl_kind: str
    entropy_coef: float
    value_coef: float
    value_clip: float
    policy_loss: str = "ppo"
    tau_pos: float = 1.0
    tau_neg: float = 1.05

    @classmethod
    def of(cls, recipe: Recipe) -> RLLoss:
        """The loss of ``recipe`` (``TrainingSettings.resolve``)."""
        return cls(recipe.loss_agg_mode, recipe.clip_low, recipe.clip_high, recipe.dual_clip_c,
                   recipe.kl_coef, recipe.kl_kind, recipe.entropy_coef, recipe.value_coef,
                   recipe.value_clip, recipe.policy_loss, recipe.tau_pos, recipe.tau_neg)

    def policy_term(self, old_logprob: torch.Tensor, logprob: torch.Tensor, advantages: torch.Tensor,
                    mask: torch.Tensor, is_weight: torch.Tensor | None = None) -> PolicyLoss:
        """The policy loss registered as ``policy_loss`` (``rl.core.registry``), [B, T] each -> ``PolicyLoss``;
        ``is_weight`` [B, T] (ppo only: ``config.training_rules.rollout_mode_problem``) weighs each token's loss."""
        registered = registered_policy_loss(self.policy_loss)
        settings = {name: getattr(self, name) for name in registered.settings if name != IS_WEIGHT}
        if registered.takes_is_weight:
            settings[IS_WEIGHT] = is_weight
        elif is_weight is not None:
            weighing = [name for name, loss in POLICY_LOSS_REGISTRY.items() if loss.takes_is_weight]
            raise ValueError(f"importance weights apply to the {', '.join(weighing)} policy loss only, "
                             f"not {self.policy_loss!r}")
        return registered.loss(old_logprob, logprob, advantages, mask, **settings)

    def shares(self, part_mask: torch.Tensor, whole: torch.Tensor) -> LossShares:
        """A micro-batch's (mask [b, T]) shares of its minibatch's (mask [B, T]) loss terms."""
        other = aggregation_share(part_mask, whole, self.agg_mode)
        own = registered_policy_loss(self.policy_loss).aggregation
        if own is None:
            return LossShares(other, other)
        return LossShares(row_share(part_mask, whole) if own == ROWS else aggregation_share(part_mask, whole, own),
                          other)

    def __call__(self, logprob: torch.Tensor, entropy: torch.Tensor, values: torch.Tensor | None,
                 targets: Targets, shares: LossShares = WHOLE) -> tuple[PartLoss, LossStats]:
        """logprob, entropy (of the current policy), values (of the value head, or None): [B, T]
        over the same rows as ``targets``. Returns the loss weighted by ``shares`` (default: the
        micro-batch is the minibatch) and its :class:`LossStats`."""
        mask = targets.mask  # [B, T]
        policy = self.policy_term(targets.old_logprob, logprob, targets.advantages, mask, targets.is_weight)
        loss = policy.loss if shares.policy == shares.other else torch.zeros_like(policy.loss)  # []
        if targets.ref_logprob is not None and self.kl_coef > 0:
            kl = kl_penalty(logprob, targets.ref_logprob, self.kl_kind)  # [B, T]
            loss = loss + self.kl_coef * aggregate_loss(kl, mask, self.agg_mode)
        if self.entropy_coef > 0:
            loss = loss - self.entropy_coef * aggregate_loss(entropy, mask, self.agg_mode)
        critic = None
        if values is not None:
            critic = value_loss(values, targets.returns, targets.old_values, mask, self.value_clip, self.agg_mode)
            loss = loss + self.value_coef * critic.loss
        if shares.policy == shares.other:  # every term weighs alike
            part = PartLoss(loss * shares.other, float(loss.detach()) * shares.other)
        else:
            weighted = policy.loss * shares.policy + loss * shares.other
            part = PartLoss(weighted, float(weighted.detach()))
        stats = LossStats(tokens=float(mask.sum()), clip_fraction=float(policy.clipfrac),
                          approx_kl=float(policy.approx_kl), dual_clip_fraction=float(policy.dual_clipfrac),
                          value_loss=float(critic.loss.detach()) if critic else None,
                          value_clip_fraction=float(critic.clipfrac) if critic else None)
        return part, stats


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
