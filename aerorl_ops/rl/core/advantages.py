"""Advantage estimators as plain tensor functions: GRPO (and Dr.GRPO), RLOO, REINFORCE++, GAE, and
the masked whitening they share. They run without gradient: advantages and returns are targets.

Shapes and the mask convention are ``rl.core.functional``'s: every per-token tensor is ``[B, T]`` over
the response tokens of B sequences, ``response_mask`` "True = counted". The definitions are verl's
(``verl/trainer/ppo/core_algos.py``); REINFORCE++'s one deliberate difference is noted where it applies.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import NamedTuple

import torch

from aerorl_ops.losses import masked_mean
from aerorl_ops.rl.core.functional import check_tokens, check_unit_interval

WHITEN_EPS = 1e-8  # added to the variance in masked_whiten, as in verl


class Advantages(NamedTuple):
    advantages: torch.Tensor  # [B, T]
    returns: torch.Tensor  # [B, T]


def _group_moments(scores: torch.Tensor, group_ids: Sequence[Hashable]) -> tuple[torch.Tensor, ...]:
    """Each row's group size, group mean and unbiased group std (0 for a group of one). scores: [B] -> 3 x [B]."""
    ids = group_ids.tolist() if isinstance(group_ids, torch.Tensor) else list(group_ids)
    if len(ids) != scores.shape[0]:
        raise ValueError(f"group_ids has {len(ids)} ids but token_rewards has {scores.shape[0]} rows; give one per row")
    slots: dict[Hashable, int] = {}
    try:
        rows = [slots.setdefault(group_id, len(slots)) for group_id in ids]
    except TypeError as err:
        raise ValueError(f"group_ids must be hashable (e.g. prompt ids or strings): {err}") from err
    slot = torch.tensor(rows, dtype=torch.long, device=scores.device)  # [B]
    count = torch.bincount(slot, minlength=len(slots)).to(scores.dtype)  # [G]
    mean = (scores.new_zeros(len(slots)).index_add_(0, slot, scores) / count)[slot]  # [B]
    square_sum = scores.new_zeros(len(slots)).index_add_(0, slot, (scores - mean) ** 2)  # [G]
    std = (square_sum / (count - 1).clamp(min=1)).sqrt()[slot]  # [B], divides by n - 1 (unbiased)
    return count[slot], mean, std


@torch.no_grad()
def grpo_advantages(
    token_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    group_ids: Sequence[Hashable],
    eps: float = 1e-6,
    scale_by_std: bool = True,
) -> Advantages:
    """GRPO outcome advantages (Shao et al., 2024); ``scale_by_std=False`` is Dr.GRPO (Liu et al., 2025).

    Per row i with score ``s_i = sum_t token_rewards[i, t]`` in group g (the rows sharing
    ``group_ids[i]``), ``A_i = (s_i - mean_g) / (std_g + eps)``, or ``A_i = s_i - mean_g`` without
    std scaling; ``std_g`` is the unbiased (n - 1) standard deviation. A group of one has mean 0
    and std 1. Then ``advantages[i, t] = returns[i, t] = A_i * response_mask[i, t]``.

    token_rewards, response_mask: [B, T]; group_ids: B hashable ids (a list, an array or a 1-D
    tensor). Returns :class:`Advantages`, both [B, T].
    """
    check_tokens(token_rewards=token_rewards, response_mask=response_mask)
    mask = response_mask.to(token_rewards.dtype)  # [B, T]
    scores = token_rewards.sum(dim=-1)  # [B]
    size, mean, std = _group_moments(scores, group_ids)  # [B] each
    alone = size == 1  # [B]
    mean = mean.masked_fill(alone, 0.0)  # [B]
    std = std.masked_fill(alone, 1.0)  # [B]
    centred = scores - mean  # [B]
    advantages = (centred / (std + eps) if scale_by_std else centred)[:, None] * mask  # [B, T]
    return Advantages(advantages, advantages.clone())


@torch.no_grad()
def rloo_advantages(
    token_rewards: torch.Tensor, response_mask: torch.Tensor, group_ids: Sequence[Hashable]
) -> Advantages:
    """REINFORCE leave-one-out advantages (Ahmadian et al., 2024).

    Per row i with score ``s_i = sum_t token_rewards[i, t]`` in a group of n rows with mean ``m``:
    ``A_i = s_i * n/(n-1) - m * n/(n-1)`` (= s_i minus the mean of the other n - 1 scores) when
    n > 1; a group of one keeps ``A_i = s_i`` (as verl). ``advantages = returns = A_i * response_mask``.

    token_rewards, response_mask: [B, T]; group_ids: B hashable ids. Returns :class:`Advantages`, [B, T].
    """
    check_tokens(token_rewards=token_rewards, response_mask=response_mask)
    mask = response_mask.to(token_rewards.dtype)  # [B, T]
    scores = token_rewards.sum(dim=-1)  # [B]
    size, mean, _ = _group_moments(scores, group_ids)  # [B] each
    scale = size / (size - 1).clamp(min=1)  # [B] n / (n - 1)
    advantages = torch.where(size > 1, scores * scale - mean * scale, scores)[:, None] * mask  # [B, T]
    return Advantages(advantages, advantages.clone())


@torch.no_grad()
def reinforce_pp_advantages(token_rewards: torch.Tensor, response_mask: torch.Tensor, gamma: float) -> Advantages:
    """REINFORCE++ advantages (Hu, 2025): discounted returns, whitened over the batch.

    Backwards over t, with the running return G (0 after the last token):
    ``G <- r_t + gamma * G`` where ``m_t = 1`` and G unchanged where ``m_t = 0``; the stored
    return is ``returns[:, t] = G * m_t``. A masked position (an observation span) thus passes
    later rewards through undiscounted, ignores its own reward and has return 0.
    ``advantages = masked_whiten(returns, m) * m`` (unbiased variance, eps 1e-8).

    verl resets G at every masked position; for right-padded masks the results are the same.
    token_rewards, response_mask: [B, T]; gamma in [0, 1]. Returns :class:`Advantages`, [B, T].
    """
    check_tokens(token_rewards=token_rewards, response_mask=response_mask)
    check_unit_interval("gamma", gamma)
    mask = response_mask.to(token_rewards.dtype)  # [B, T]
    returns = torch.zeros_like(token_rewards)  # [B, T]
    running = token_rewards.new_zeros(token_rewards.shape[0])  # [B]
    for t in reversed(range(token_rewards.shape[1])):
        counted = mask[:, t] > 0  # [B]
        running = torch.where(counted, token_rewards[:, t] + gamma * running, running)  # [B]
        returns[:, t] = running * mask[:, t]  # [B]
    advantages = masked_whiten(returns, mask) * mask  # [B, T]
    return Advantages(advantages, returns)


@torch.no_grad()
def gae_advantages(
    token_rewards: torch.Tensor, values: torch.Tensor, response_mask: torch.Tensor, gamma: float, lam: float
) -> Advantages:
    """Generalized advantage estimation (Schulman et al., 2016) with masked positions skipped.

    Backwards over t, with ``V_next = 0`` and ``A_next = 0`` after the last token:
    ``delta_t = r_t + gamma * V_next - V_t`` and ``A_t = delta_t + gamma * lam * A_next``.
    Where ``m_t = 1``, ``V_next <- V_t`` and ``A_next <- A_t``; where ``m_t = 0`` both pass through
    unchanged, and the position's raw advantage is the carried ``A_next``.
    ``returns = A + values`` (raw advantages), then ``advantages = masked_whiten(A, m)``; as in
    verl, masked positions are not zeroed afterwards.

    token_rewards, values, response_mask: [B, T]; gamma, lam in [0, 1]. Returns :class:`Advantages`, [B, T].
    """
    check_tokens(token_rewards=token_rewards, values=values, response_mask=response_mask)
    check_unit_interval("gamma", gamma)
    check_unit_interval("lam", lam)
    mask = response_mask.to(token_rewards.dtype)  # [B, T]
    raw = torch.zeros_like(token_rewards)  # [B, T]
    next_value = token_rewards.new_zeros(token_rewards.shape[0])  # [B]
    next_advantage = token_rewards.new_zeros(token_rewards.shape[0])  # [B]
    for t in reversed(range(token_rewards.shape[1])):
        counted = mask[:, t] > 0  # [B]
        delta = token_rewards[:, t] + gamma * next_value - values[:, t]  # [B]
        next_advantage = torch.where(counted, delta + gamma * lam * next_advantage, next_advantage)  # [B]
        next_value = torch.where(counted, values[:, t], next_value)  # [B]
        raw[:, t] = next_advantage  # [B]
    returns = raw + values  # [B, T]
    return Advantages(masked_whiten(raw, mask), returns)


def masked_whiten(values: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True) -> torch.Tensor:
    """Normalise ``values`` by the mean and unbiased variance of the positions ``mask`` counts.

    With n = sum(mask), ``mu = sum(x * m) / n`` and ``var = sum((x - mu)^2 * m) / (n - 1)``:
    ``(x - mu) / sqrt(var + 1e-8)``, plus ``mu`` again when ``shift_mean=False``. Every position is
    transformed, counted or not. values, mask: same shape (e.g. [B, T]) -> that shape.
    The mask must count at least two positions (n - 1 > 0), as in verl.
    """
    if mask.shape != values.shape:
        raise ValueError(
            f"mask has shape {tuple(mask.shape)} but values has shape {tuple(values.shape)}; they must match"
        )
    weights = mask.to(values.dtype)  # same shape as values
    count = weights.sum()  # []
    if count < 2:
        raise ValueError(f"mask counts {count.item():g} positions; whitening with unbiased variance needs at least 2")
    mean = masked_mean(values, weights)  # []
    variance = masked_mean((values - mean) ** 2, weights) * count / (count - 1)  # [] unbiased
    whitened = (values - mean) * torch.rsqrt(variance + WHITEN_EPS)  # same shape as values
    return whitened if shift_mean else whitened + mean
