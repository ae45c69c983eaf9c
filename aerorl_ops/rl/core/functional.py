"""The RL core as plain tensor functions: KL estimators, loss aggregation, PPO losses (the
advantage estimators are ``rl.core.advantages``).

Shapes: every per-token tensor is ``[B, T]`` over the response tokens of B sequences.
``response_mask`` is 1.0 at a real response token and 0.0 elsewhere (padding, observation
spans); a bool mask works too. This is the project's convention, "True = counted".

The advantage estimators run without gradient: advantages and returns are targets.

Where issue #12 gives no formula, the definitions are verl's (``verl/trainer/ppo/core_algos.py``,
``verl/utils/torch_functional.py``). Deliberate differences, each also noted where it applies:

* REINFORCE++ carries the running return through a masked position and gives it return 0 (the
  issue's rule); verl resets the running return there. With right-padded masks the two agree.
* Averages over nothing (an all-masked batch) are 0, not NaN, as in :func:`masked_mean`; and
  ``"seq-mean-token-mean"`` divides by the exact token count (verl adds 1e-8).
* ``"seq-mean-token-sum-norm"`` is the seq-mean of token sums over T (the issue's definition, as
  in TRL's ``dr_grpo``); verl divides the *sum* over sequences by T.
* ``"token-sum"`` is not a verl mode; it is the plain masked sum.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from aerorl_ops.losses import masked_mean
from aerorl_ops.rl.core.registry import register_policy_loss

LOG_RATIO_CLAMP = 20.0  # |new - old| and |ref - new| are clamped to this before exp, as in verl
K3_VALUE_CLAMP = 10.0  # k3 per-token values are clamped to [-10, 10], as in verl
EXPLAINED_VARIANCE_EPS = 1e-5  # added to Var(returns) in explained_variance, as in verl


class PolicyLoss(NamedTuple):
    loss: torch.Tensor  # [] differentiable
    clipfrac: torch.Tensor  # [] detached, fraction of counted tokens where the ratio clip binds
    approx_kl: torch.Tensor  # [] detached, masked mean of old - new log-prob
    dual_clipfrac: torch.Tensor  # [] detached, fraction of counted tokens where the dual clip binds


class ValueLoss(NamedTuple):
    loss: torch.Tensor  # [] differentiable
    clipfrac: torch.Tensor  # [] detached, fraction of counted tokens where the clipped term is larger


def check_tokens(**tensors: torch.Tensor) -> None:
    """Raise a ValueError naming the argument unless all tensors share the first one's [B, T] shape."""
    (first_name, first), *rest = tensors.items()
    if first.ndim != 2:
        raise ValueError(f"{first_name} must have shape [B, T] (sequences x response tokens); got {tuple(first.shape)}")
    for name, tensor in rest:
        if tensor.shape != first.shape:
            raise ValueError(
                f"{name} has shape {tuple(tensor.shape)} but {first_name} has shape {tuple(first.shape)}; "
                "both must be [B, T] over the same response tokens"
            )


def _check_fraction(name: str, value: float) -> None:
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must lie in (0, 1); got {value}")


def check_unit_interval(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1]; got {value}")


def _k1(logprob: torch.Tensor, ref_logprob: torch.Tensor) -> torch.Tensor:
    return logprob - ref_logprob  # [B, T]


def _abs(logprob: torch.Tensor, ref_logprob: torch.Tensor) -> torch.Tensor:
    return (logprob - ref_logprob).abs()  # [B, T]


def _k2(logprob: torch.Tensor, ref_logprob: torch.Tensor) -> torch.Tensor:
    return 0.5 * (logprob - ref_logprob).square()  # [B, T]


def _k3(logprob: torch.Tensor, ref_logprob: torch.Tensor) -> torch.Tensor:
    d = torch.clamp(ref_logprob - logprob, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)  # [B, T]
    return torch.clamp(torch.exp(d) - d - 1.0, -K3_VALUE_CLAMP, K3_VALUE_CLAMP)  # [B, T]


KL_ESTIMATORS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "k1": _k1,
    "kl": _k1,
    "abs": _abs,
    "k2": _k2,
    "mse": _k2,
    "k3": _k3,
    "low_var_kl": _k3,
}


def kl_penalty(logprob: torch.Tensor, ref_logprob: torch.Tensor, kind: str) -> torch.Tensor:
    """Per-token estimate of KL(policy || reference) (Schulman, "Approximating KL divergence", 2020).

    With ``delta = logprob - ref_logprob``:

    * ``"k1"`` / ``"kl"``: ``delta``;
    * ``"abs"``: ``|delta|``;
    * ``"k2"`` / ``"mse"``: ``0.5 * delta^2``;
    * ``"k3"`` / ``"low_var_kl"``: with ``d = clamp(-delta, -20, 20)``, ``clamp(exp(d) - d - 1, -10, 10)``;
    * a ``"+"`` suffix (``"k1+"``, ``"k3+"``, ...) keeps that kind's value but takes k2's gradient
      (straight-through: ``k2 - k2.detach() + value.detach()``). verl documents these kinds; its
      current code rejects them, as ``kl_penalty_forward`` never strips the suffix.

    logprob, ref_logprob: [B, T] -> [B, T]. An unknown ``kind`` is a ValueError.
    """
    base = kind[:-1] if isinstance(kind, str) and kind.endswith("+") else kind
    if base not in KL_ESTIMATORS:
        raise ValueError(f"kind {kind!r} is not a KL kind; choose one of {sorted(KL_ESTIMATORS)}, optionally + '+'")
    check_tokens(logprob=logprob, ref_logprob=ref_logprob)
    value = KL_ESTIMATORS[base](logprob, ref_logprob)  # [B, T]
    if base == kind:
        return value
    k2 = _k2(logprob, ref_logprob)  # [B, T]
    return k2 - k2.detach() + value.detach()  # [B, T] value of `kind`, gradient of k2


def _sequence_token_sums(loss_mat: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (loss_mat * mask).sum(dim=-1)  # [B]


def _nonempty(mask: torch.Tensor) -> torch.Tensor:
    return mask.sum(dim=-1) > 0  # [B] sequences with at least one counted token


AGGREGATORS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "token-mean": lambda loss, mask: masked_mean(loss, mask),
    "token-sum": lambda loss, mask: (loss * mask).sum(),
    "seq-mean-token-sum": lambda loss, mask: masked_mean(_sequence_token_sums(loss, mask), _nonempty(mask)),
    "seq-mean-token-mean": lambda loss, mask: masked_mean(masked_mean(loss, mask, dim=-1), _nonempty(mask)),
    "seq-mean-token-sum-norm": lambda loss, mask: (
        masked_mean(_sequence_token_sums(loss, mask), _nonempty(mask)) / mask.shape[-1]
    ),
}


def _check_agg_mode(name: str, mode: str) -> None:
    if mode not in AGGREGATORS:
        raise ValueError(f"{name} {mode!r} is not an aggregation mode; choose one of {list(AGGREGATORS)}")


def aggregate_loss(loss_mat: torch.Tensor, loss_mask: torch.Tensor, mode: str) -> torch.Tensor:
    """Reduce a per-token loss to a scalar over the tokens ``loss_mask`` counts.

    With ``L = loss_mat * loss_mask``, ``n_i`` the counted tokens of row i and S the rows with n_i > 0:

    * ``"token-mean"``: ``sum(L) / sum(n_i)``;
    * ``"token-sum"``: ``sum(L)``;
    * ``"seq-mean-token-sum"``: ``mean over i in S of sum_t L[i, t]``;
    * ``"seq-mean-token-mean"``: ``mean over i in S of sum_t L[i, t] / n_i``;
    * ``"seq-mean-token-sum-norm"``: ``"seq-mean-token-sum"`` divided by T (Dr.GRPO's constant normaliser).

    A mean over nothing is 0. Values at uncounted positions never reach the result, even NaN.
    loss_mat, loss_mask: [B, T] -> [].
    """
    _check_agg_mode("mode", mode)
    check_tokens(loss_mat=loss_mat, loss_mask=loss_mask)
    mask = loss_mask.to(loss_mat.dtype)  # [B, T]
    loss_mat = torch.where(mask > 0, loss_mat, 0.0)  # [B, T] uncounted positions cannot leak NaN or inf
    return AGGREGATORS[mode](loss_mat, mask)  # []


def aggregation_share(part_mask: torch.Tensor, batch_mask: torch.Tensor, mode: str) -> float:
    """The weight of one micro-batch's ``aggregate_loss`` in its whole batch's (exact gradient accumulation).

    With the batch's rows split into micro-batches k (masks ``m_k``, all of the batch's width T),
    ``aggregate_loss(L, m, mode) = sum_k share_k * aggregate_loss(L_k, m_k, mode)`` where ``share_k`` is
    ``sum(m_k) / sum(m)`` for ``"token-mean"``, ``S_k / S`` for the ``"seq-mean-*"`` modes (S: rows with a
    counted token) and 1 for ``"token-sum"``. A share of an empty batch is 0.
    part_mask: [b, T]; batch_mask: [B, T]. Returns a float.
    """
    _check_agg_mode("mode", mode)
    if mode == "token-sum":
        return 1.0
    count = (lambda m: float(m.sum())) if mode == "token-mean" else (lambda m: float(_nonempty(m).sum()))
    whole = count(batch_mask.to(torch.float64))
    return count(part_mask.to(torch.float64)) / whole if whole else 0.0


@torch.no_grad()
def explained_variance(values: torch.Tensor, returns: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """How much of the returns' variance the values explain: ``1 - Var(R - V) / (Var(R) + 1e-5)`` (verl).

    Both variances are unbiased (n - 1) over the counted positions; 1 for a perfect critic, 0 for a
    constant one, negative for a worse one. NaN when fewer than two positions count.
    values, returns, response_mask: [B, T] -> [].
    """
    check_tokens(values=values, returns=returns, response_mask=response_mask)
    weights = response_mask.to(returns.dtype)  # [B, T]
    count = weights.sum()  # []
    if count < 2:
        return returns.new_tensor(float("nan"))

    def variance(x: torch.Tensor) -> torch.Tensor:
        return masked_mean((x - masked_mean(x, weights)) ** 2, weights) * count / (count - 1)  # []

    return 1.0 - variance(returns - values) / (variance(returns) + EXPLAINED_VARIANCE_EPS)  # []


@register_policy_loss("ppo")
def policy_loss(
    old_logprob: torch.Tensor,
    logprob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip_c: float = 3.0,
    agg_mode: str = "token-mean",
    is_weight: torch.Tensor | None = None,
) -> PolicyLoss:
    """PPO's clipped surrogate (Schulman et al., 2017) with an asymmetric range and dual clip (Ye et al., 2020).

    Per token, with ``ratio = exp(clamp(logprob - old_logprob, -20, 20))``:
    ``l1 = -A * ratio``, ``l2 = -A * clamp(ratio, 1 - clip_low, 1 + clip_high)``, ``l = max(l1, l2)``;
    where ``A < 0`` the loss is ``min(l, -A * dual_clip_c)``. The loss is ``aggregate_loss(., agg_mode)``.
    Statistics (detached, masked means): ``clipfrac`` of ``l2 > l1``; ``approx_kl`` of
    ``old_logprob - logprob`` (clamped like the ratio, as in verl); ``dual_clipfrac`` of
    ``A < 0 and l > -A * dual_clip_c``.

    old_logprob, logprob, advantages, response_mask: [B, T]. clip_low, clip_high in (0, 1);
    dual_clip_c > 1. ``is_weight`` [B, T] (detached; None: 1): multiplies each token's loss before the
    aggregation, as verl's ``rollout_is_weights`` (``truncated_is_weight``).
    Returns :class:`PolicyLoss` (loss, clipfrac, approx_kl, dual_clipfrac), each [].
    """
    check_tokens(logprob=logprob, old_logprob=old_logprob, advantages=advantages, response_mask=response_mask)
    if is_weight is not None:
        check_tokens(logprob=logprob, is_weight=is_weight)
    _check_fraction("clip_low", clip_low)
    _check_fraction("clip_high", clip_high)
    if not dual_clip_c > 1.0:
        raise ValueError(f"dual_clip_c must be greater than 1; got {dual_clip_c}")
    _check_agg_mode("agg_mode", agg_mode)
    mask = response_mask.to(logprob.dtype)  # [B, T]
    log_ratio = torch.clamp(logprob - old_logprob, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)  # [B, T]
    ratio = torch.exp(log_ratio)  # [B, T]
    unclipped = -advantages * ratio  # [B, T]
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)  # [B, T]
    clip_loss = torch.maximum(unclipped, clipped)  # [B, T]
    dual_bound = -advantages * dual_clip_c  # [B, T]
    negative = advantages < 0  # [B, T]
    losses = torch.where(negative, torch.minimum(clip_loss, dual_bound), clip_loss)  # [B, T]
    if is_weight is not None:
        losses = losses * is_weight  # [B, T]
    loss = aggregate_loss(losses, mask, agg_mode)  # []
    with torch.no_grad():
        return PolicyLoss(
            loss=loss,
            clipfrac=masked_mean((clipped > unclipped).to(mask.dtype), mask),  # []
            approx_kl=masked_mean(-log_ratio, mask),  # []
            dual_clipfrac=masked_mean((negative & (clip_loss > dual_bound)).to(mask.dtype), mask),  # []
        )


def truncated_is_weight(old_logprob: torch.Tensor, behaviour_logprob: torch.Tensor, cap: float = 2.0) -> torch.Tensor:
    """Truncated importance sampling (TIS; Yao et al., 2025, "Your efficient RL framework secretly brings
    you off-policy RL training"; verl's ``rollout_is`` in token mode, ``compute_rollout_importance_weights``):
    per token, ``w = min(exp(clamp(old_logprob - behaviour_logprob, -20, 20)), cap)``, detached.

    ``old_logprob`` [B, T]: the step's start weights (the PPO ratio's denominator) on the sampled replies;
    ``behaviour_logprob`` [B, T]: the weights that sampled them. ``cap`` > 0. Returns [B, T], no gradient;
    the policy loss multiplies each token's loss by it (``policy_loss(is_weight=...)``).

    >>> truncated_is_weight(torch.tensor([[0.0, -1.0]]), torch.tensor([[-1.0, 0.0]]))
    tensor([[2.0000, 0.3679]])
    """
    check_tokens(old_logprob=old_logprob, behaviour_logprob=behaviour_logprob)
    if not cap > 0.0:
        raise ValueError(f"cap must be positive; got {cap}")
    with torch.no_grad():
        log_ratio = torch.clamp(old_logprob - behaviour_logprob, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)  # [B, T]
        return torch.exp(log_ratio).clamp(max=cap)  # [B, T]


def value_loss(
    values_pred: torch.Tensor,
    returns: torch.Tensor,
    old_values: torch.Tensor,
    response_mask: torch.Tensor,
    clip: float = 0.5,
    agg_mode: str = "token-mean",
) -> ValueLoss:
    """PPO's clipped value loss.

    Per token, with ``v_clip = clamp(v, old - clip, old + clip)``: ``l1 = (v - R)^2``,
    ``l2 = (v_clip - R)^2``; ``loss = 0.5 * aggregate_loss(max(l1, l2), agg_mode)``.
    ``clipfrac`` (detached) is the masked mean of ``l2 > l1``.

    values_pred, returns, old_values, response_mask: [B, T]; clip > 0 (in value units).
    Returns :class:`ValueLoss` (loss, clipfrac), each [].
    """
    check_tokens(values_pred=values_pred, returns=returns, old_values=old_values, response_mask=response_mask)
    if not clip > 0.0:
        raise ValueError(f"clip must be positive; got {clip}")
    _check_agg_mode("agg_mode", agg_mode)
    mask = response_mask.to(values_pred.dtype)  # [B, T]
    clipped_pred = torch.clamp(values_pred, old_values - clip, old_values + clip)  # [B, T]
    unclipped_loss = (values_pred - returns) ** 2  # [B, T]
    clipped_loss = (clipped_pred - returns) ** 2  # [B, T]
    loss = 0.5 * aggregate_loss(torch.maximum(unclipped_loss, clipped_loss), mask, agg_mode)  # []
    with torch.no_grad():
        return ValueLoss(loss=loss, clipfrac=masked_mean((clipped_loss > unclipped_loss).to(mask.dtype), mask))
