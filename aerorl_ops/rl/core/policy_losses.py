"""The field's newer policy losses (GSPO, GMPO, SAPO, CISPO) and DAPO's overlong penalty, as tensor functions.

Shapes and masking follow :mod:`aerorl_ops.rl.core.functional`: per-token tensors are ``[B, T]`` and
``response_mask`` is 1.0 (or True) at a counted token. Each loss returns
:class:`~aerorl_ops.rl.core.functional.PolicyLoss` (loss, clipfrac, approx_kl, dual_clipfrac) and is
registered under its name (``rl.core.registry``; SAPO's and GMPO's with their own aggregation).

The definitions are verl's (``verl/trainer/ppo/core_algos.py``: ``compute_policy_loss_gspo``,
``_sapo``, ``_geo_mean``, ``_cispo``; DAPO's reward manager for the overlong penalty). Deliberate
differences, each also noted where it applies:

* Every per-sequence mean divides by the exact count of counted tokens (verl adds 1e-8), and a mean
  over nothing is 0; so values differ from verl's by a relative ~1e-8 / n_i.
* Values at uncounted positions never reach a result or a gradient, even NaN or inf (verl multiplies
  by the mask, so a NaN there poisons its loss). Uncounted positions get gradient 0.
* GSPO takes ``agg_mode``; verl hard-codes ``"seq-mean-token-mean"``.
* verl's rollout-correction weights (``rollout_is_weights``) are not taken here.
"""

from __future__ import annotations

import torch

from aerorl_ops.losses import masked_mean
from aerorl_ops.rl.core.functional import (
    LOG_RATIO_CLAMP,
    PolicyLoss,
    _check_agg_mode,
    _check_fraction,
    aggregate_loss,
    check_tokens,
)
from aerorl_ops.rl.core.registry import ROWS, register_policy_loss

GSPO_LOG_RATIO_MAX = 10.0  # GSPO's token log-ratio is clamped above at 10 before exp, as in verl
SAPO_AGG_MODE = "seq-mean-token-mean"  # SAPO's fixed aggregation, as in verl


def _counted(mask: torch.Tensor, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Each tensor with its uncounted positions replaced by 0: no NaN there reaches a value or gradient."""
    keep = mask > 0  # [B, T]
    return tuple(torch.where(keep, x, 0.0) for x in tensors)  # each [B, T]


def _check_positive(name: str, value: float) -> None:
    if not value > 0.0:
        raise ValueError(f"{name} must be a positive number; got {value}")


def _fraction(flags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return masked_mean(flags.to(mask.dtype), mask)  # [] share of counted tokens where flags holds


@register_policy_loss("gspo")
def gspo_policy_loss(
    old_logprob: torch.Tensor,
    logprob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    clip_low: float,
    clip_high: float,
    agg_mode: str,
) -> PolicyLoss:
    """GSPO, Group Sequence Policy Optimization (Zheng et al. 2025, arXiv 2507.18071), in verl's token form.

    The sequence ratio ``s_i = exp(mean_t (logprob - old_logprob))`` over row i's n_i counted tokens
    is applied per token as ``log s_it = sg(log s_i) + logprob_t - sg(logprob_t)``, clamped above at
    10; then PPO's clipped surrogate ``max(-A * s_it, -A * clamp(s_it, 1 - clip_low, 1 + clip_high))``
    is reduced by ``aggregate_loss(., agg_mode)``. With ``agg_mode="seq-mean-token-mean"`` this is
    verl's ``compute_policy_loss_gspo`` (which hard-codes that mode), up to verl's 1e-8.

    Gradients: ``s_it`` has value ``s_i`` and ``d s_it / d logprob_t = s_it`` (only through the token's
    own log-prob; ``s_i`` is stopped). Where the clip binds, or ``log s_i > 10``, the gradient is 0.
    ``old_logprob`` gets no gradient.

    Statistics (detached, masked means): ``clipfrac`` of ``clipped > unclipped``; ``approx_kl`` of
    ``old_logprob - logprob`` (not clamped, as in verl); ``dual_clipfrac`` is 0 (no dual clip).

    old_logprob, logprob, advantages, response_mask: [B, T]. clip_low, clip_high in (0, 1).
    Returns :class:`PolicyLoss`, each [].
    """
    check_tokens(logprob=logprob, old_logprob=old_logprob, advantages=advantages, response_mask=response_mask)
    _check_fraction("clip_low", clip_low)
    _check_fraction("clip_high", clip_high)
    _check_agg_mode("agg_mode", agg_mode)
    mask = response_mask.to(logprob.dtype)  # [B, T]
    logprob, old_logprob, advantages = _counted(mask, logprob, old_logprob, advantages)  # [B, T] each
    log_ratio = logprob - old_logprob  # [B, T]
    seq_log_ratio = masked_mean(log_ratio, mask, dim=-1)  # [B] log s_i; 0 for an empty row
    log_token_ratio = logprob - logprob.detach() + seq_log_ratio.detach().unsqueeze(-1)  # [B, T] value log s_i
    ratio = torch.exp(torch.clamp(log_token_ratio, max=GSPO_LOG_RATIO_MAX))  # [B, T]
    unclipped = -advantages * ratio  # [B, T]
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)  # [B, T]
    loss = aggregate_loss(torch.maximum(unclipped, clipped), mask, agg_mode)  # []
    with torch.no_grad():
        return PolicyLoss(
            loss=loss,
            clipfrac=_fraction(clipped > unclipped, mask),  # []
            approx_kl=masked_mean(-log_ratio, mask),  # []
            dual_clipfrac=loss.new_zeros(()),  # []
        )


@register_policy_loss("gmpo", aggregation=ROWS)
def gmpo_policy_loss(
    old_logprob: torch.Tensor,
    logprob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    clip_low: float,
    clip_high: float,
) -> PolicyLoss:
    """GMPO, Geometric-Mean Policy Optimization (Zhao et al. 2025, arXiv 2507.20673), as verl's ``geo_mean``.

    Per token, with ``x = logprob - old_logprob`` (not clamped at 20: verl leaves that clamp commented
    out, so a large x with a negative advantage can overflow exp) and ``g = sign(A)``, the log-ratio is
    clipped sign-aware: ``c = g * min(g * x, g * clamp(x, -clip_low, clip_high))`` (for A > 0 only a
    rise above ``clip_high`` is clipped, for A < 0 only a fall below ``-clip_low``; A = 0 gives 0).
    Per row i with n_i counted tokens: ``ratio_i = exp(sum_t c / n_i)``, ``A_i = sum_t A / n_i`` (0
    for an empty row; verl divides by n_i + 1e-8). The loss is ``mean over all B rows of -A_i * ratio_i``:
    like verl's ``torch.mean``, an empty row counts in the denominator (see :func:`row_share`).

    Gradients flow through ``c`` into ``logprob`` (and ``old_logprob``); 0 where the clip binds.
    Advantages are targets.

    Statistics (detached, masked means over tokens, as verl's): ``clipfrac`` of ``x`` outside
    ``[-clip_low, clip_high]`` with A > 0 (verl's ``pg_clipfrac``); ``dual_clipfrac`` holds verl's
    ``pg_clipfrac_lower``, the same with A < 0 (not a dual clip); ``approx_kl`` of ``old - new``.

    old_logprob, logprob, advantages, response_mask: [B, T]. clip_low, clip_high > 0 (bounds on the
    log-ratio, not fractions). Returns :class:`PolicyLoss`, each [].
    """
    check_tokens(logprob=logprob, old_logprob=old_logprob, advantages=advantages, response_mask=response_mask)
    _check_positive("clip_low", clip_low)
    _check_positive("clip_high", clip_high)
    mask = response_mask.to(logprob.dtype)  # [B, T]
    logprob, old_logprob, advantages = _counted(mask, logprob, old_logprob, advantages)  # [B, T] each
    log_ratio = logprob - old_logprob  # [B, T]
    sign = torch.sign(advantages)  # [B, T]
    bounded = torch.clamp(log_ratio, -clip_low, clip_high)  # [B, T]
    clipped_log_ratio = sign * torch.minimum(sign * log_ratio, sign * bounded)  # [B, T]
    ratio = torch.exp(masked_mean(clipped_log_ratio, mask, dim=-1))  # [B]
    seq_advantages = masked_mean(advantages, mask, dim=-1)  # [B]
    losses = -seq_advantages * ratio  # [B]
    loss = losses.sum() / max(losses.shape[0], 1)  # [] mean over all rows; 0 for B = 0
    with torch.no_grad():
        out_of_range = log_ratio != bounded  # [B, T]
        return PolicyLoss(
            loss=loss,
            clipfrac=_fraction(out_of_range & (advantages > 0), mask),  # []
            approx_kl=masked_mean(-log_ratio, mask),  # []
            dual_clipfrac=_fraction(out_of_range & (advantages < 0), mask),  # []
        )


def row_share(part_mask: torch.Tensor, batch_mask: torch.Tensor) -> float:
    """The weight of one micro-batch's :func:`gmpo_policy_loss` in its whole batch's (exact accumulation).

    GMPO's loss is a plain mean over rows, empty rows included, so with the batch's rows split into
    micro-batches k, ``gmpo(batch) = sum_k row_share(m_k, m) * gmpo(part_k)``: the share is
    ``b_k / B`` (rows in the part over rows in the batch; 0 for an empty batch). The other losses here
    reduce through ``aggregate_loss``: use ``functional.aggregation_share`` with their mode.
    part_mask: [b, T]; batch_mask: [B, T]. Returns a float.
    """
    if batch_mask.ndim != 2:
        raise ValueError(f"batch_mask must have shape [B, T] (rows x response tokens); got {tuple(batch_mask.shape)}")
    if part_mask.ndim != 2 or part_mask.shape[-1] != batch_mask.shape[-1]:
        raise ValueError(
            f"part_mask has shape {tuple(part_mask.shape)} but batch_mask has shape {tuple(batch_mask.shape)}; "
            "part_mask must be [b, T] rows of the same batch"
        )
    rows = batch_mask.shape[0]
    return part_mask.shape[0] / rows if rows else 0.0


@register_policy_loss("sapo", aggregation=SAPO_AGG_MODE)
def sapo_policy_loss(
    old_logprob: torch.Tensor,
    logprob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    tau_pos: float,
    tau_neg: float,
) -> PolicyLoss:
    """SAPO, Soft Adaptive Policy Optimization (arXiv 2511.20347), as verl's ``sapo``.

    Per token, with ``r = exp(clamp(logprob - old_logprob, -20, 20))`` and ``tau = tau_pos`` where
    A > 0 else ``tau_neg``: a soft gate ``f(r) = sigmoid(tau * (r - 1)) * 4 / tau`` replaces the hard
    clip, and the token loss is ``-f(r) * A``, reduced by ``aggregate_loss(., "seq-mean-token-mean")``
    (fixed, as in verl). ``f(1) = 2 / tau`` and ``f'(1) = 1``: near on-policy it is the plain policy
    gradient; ``f'(r) = 4 * s * (1 - s)`` (s the sigmoid) decays as r leaves 1, faster for larger tau.

    Gradients flow through r into ``logprob`` (and ``old_logprob``), 0 where the clamp at 20 binds;
    advantages are targets. Statistics: ``approx_kl`` is the masked mean of the clamped
    ``old_logprob - logprob``; ``clipfrac`` and ``dual_clipfrac`` are 0 (nothing is clipped).

    old_logprob, logprob, advantages, response_mask: [B, T]. tau_pos, tau_neg > 0.
    Returns :class:`PolicyLoss`, each [].
    """
    check_tokens(logprob=logprob, old_logprob=old_logprob, advantages=advantages, response_mask=response_mask)
    _check_positive("tau_pos", tau_pos)
    _check_positive("tau_neg", tau_neg)
    mask = response_mask.to(logprob.dtype)  # [B, T]
    logprob, old_logprob, advantages = _counted(mask, logprob, old_logprob, advantages)  # [B, T] each
    log_ratio = torch.clamp(logprob - old_logprob, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)  # [B, T]
    ratio = torch.exp(log_ratio)  # [B, T]
    taus = torch.where(advantages > 0, advantages.new_tensor(tau_pos), advantages.new_tensor(tau_neg))  # [B, T]
    gates = torch.sigmoid(taus * (ratio - 1.0)) * (4.0 / taus)  # [B, T]
    loss = aggregate_loss(-gates * advantages, mask, SAPO_AGG_MODE)  # []
    with torch.no_grad():
        zero = loss.new_zeros(())  # []
        return PolicyLoss(loss=loss, clipfrac=zero, approx_kl=masked_mean(-log_ratio, mask), dual_clipfrac=zero)


@register_policy_loss("cispo")
def cispo_policy_loss(
    old_logprob: torch.Tensor,
    logprob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    clip_low: float,
    clip_high: float,
    agg_mode: str,
) -> PolicyLoss:
    """CISPO, clipped importance-sampling-weight policy optimization (MiniMax-M1, arXiv 2506.13585), as verl's.

    Per token, with ``r = exp(clamp(logprob - old_logprob, -20, 20))``: the token loss is
    ``-sg(clamp(r, 1 - clip_low, 1 + clip_high)) * A * logprob``, reduced by ``aggregate_loss(., agg_mode)``.
    Unlike PPO, a clipped token still contributes a gradient: REINFORCE weighted by the clipped ratio.

    Gradients: the clipped ratio is stopped, so the gradient is ``-clip(r) * A`` times the
    aggregation weight at each counted token (``1 / sum(n)`` for ``"token-mean"``); nothing flows
    through r, and ``old_logprob`` gets none.

    Statistics (detached, masked means): ``clipfrac`` of ``r != clip(r)``; ``approx_kl`` of the
    clamped ``old_logprob - logprob``; ``dual_clipfrac`` is 0.

    old_logprob, logprob, advantages, response_mask: [B, T]. clip_low > 0: the paper sets no lower
    bound, which is ``clip_low >= 1`` (so clip_low is not limited to (0, 1)); clip_high > 0.
    Returns :class:`PolicyLoss`, each [].
    """
    check_tokens(logprob=logprob, old_logprob=old_logprob, advantages=advantages, response_mask=response_mask)
    _check_positive("clip_low", clip_low)
    _check_positive("clip_high", clip_high)
    _check_agg_mode("agg_mode", agg_mode)
    mask = response_mask.to(logprob.dtype)  # [B, T]
    logprob, old_logprob, advantages = _counted(mask, logprob, old_logprob, advantages)  # [B, T] each
    log_ratio = torch.clamp(logprob - old_logprob, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)  # [B, T]
    ratio = torch.exp(log_ratio)  # [B, T]
    clipped_ratio = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)  # [B, T]
    loss = aggregate_loss(-clipped_ratio.detach() * advantages * logprob, mask, agg_mode)  # []
    with torch.no_grad():
        return PolicyLoss(
            loss=loss,
            clipfrac=_fraction(ratio != clipped_ratio, mask),  # []
            approx_kl=masked_mean(-log_ratio, mask),  # []
            dual_clipfrac=loss.new_zeros(()),  # []
        )


def overlong_penalty(
    response_lengths: torch.Tensor, max_response_length: int, buffer_length: int, penalty_factor: float
) -> torch.Tensor:
    """DAPO's soft overlong punishment (Yu et al. 2025, arXiv 2503.14476), as verl's DAPO reward manager.

    Per response of L valid tokens: ``min(-(L - (max_response_length - buffer_length)) / buffer_length
    * penalty_factor, 0)``: 0 up to ``max - buffer`` tokens, then falling linearly to
    ``-penalty_factor`` at ``max_response_length`` (and on past it, as in verl). It is added to the
    response's reward; no gradient is involved.

    response_lengths: [B] (int or float) -> [B] float (the input's float dtype, else the default).
    max_response_length >= 1; buffer_length in 1..max_response_length; penalty_factor >= 0.

    >>> overlong_penalty(torch.tensor([10, 18, 20]), max_response_length=20, buffer_length=4, penalty_factor=1.0)
    tensor([ 0.0000, -0.5000, -1.0000])
    """
    if response_lengths.ndim != 1:
        raise ValueError(
            f"response_lengths must have shape [B] (one length per response); got {tuple(response_lengths.shape)}"
        )
    if not max_response_length >= 1:
        raise ValueError(f"max_response_length must be at least 1; got {max_response_length}")
    if not 1 <= buffer_length <= max_response_length:
        raise ValueError(
            f"buffer_length must lie in 1..max_response_length ({max_response_length}); got {buffer_length}"
        )
    if not penalty_factor >= 0.0:
        raise ValueError(f"penalty_factor must be >= 0; got {penalty_factor}")
    dtype = response_lengths.dtype if response_lengths.is_floating_point() else torch.get_default_dtype()
    exceed = response_lengths.to(dtype) - (max_response_length - buffer_length)  # [B]
    return torch.clamp(-exceed / buffer_length * penalty_factor, max=0.0)  # [B]
