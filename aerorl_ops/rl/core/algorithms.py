"""RL algorithms' advantage estimators, on the functional core (``aerorl_ops.rl.core.functional``).

An algorithm says how advantages are estimated from per-token rewards and whether it trains a value
head (PPO); ``ESTIMATORS`` holds one per algorithm name. Its defaults for the settings a run leaves
unset are written once, beside the names, in ``aerorl_ops.config.algorithms``.

==============  ==============================
algorithm       advantages
==============  ==============================
grpo            group mean / unbiased std
dr_grpo         group mean only
rloo            leave-one-out group mean
reinforce_pp    discounted returns, whitened
ppo             GAE on the value head, whitened
dapo            as grpo
gspo            as grpo
==============  ==============================

Everything else is shared: token rewards (``token_rewards``), and the loss (``rl.step.loss.RLLoss``).
Shapes follow the core: ``[B, T]`` over response tokens.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch

from aerorl_ops.rl.core.advantages import (
    Advantages,
    gae_advantages,
    grpo_advantages,
    reinforce_pp_advantages,
    rloo_advantages,
)


def outcome_token_rewards(rewards: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Each sequence's reward at its last counted token, 0 elsewhere. rewards: [B]; mask: [B, T] -> [B, T]."""
    mask = response_mask.bool()  # [B, T]
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)  # [B, T]
    last = torch.where(mask, positions, -1).max(dim=1).values  # [B]
    token_rewards = torch.zeros(mask.shape, dtype=rewards.dtype, device=mask.device)  # [B, T]
    rows = torch.nonzero(last >= 0).squeeze(1)  # [B']
    token_rewards[rows, last[rows]] = rewards[rows].to(mask.device)
    return token_rewards


def token_rewards(rewards: torch.Tensor, response_mask: torch.Tensor, kl: torch.Tensor | None = None,
                  kl_coef: float = 0.0, placed: torch.Tensor | None = None) -> torch.Tensor:
    """``r[i, t] = rewards[i]`` at row i's last counted token, 0 elsewhere (or ``placed``: rewards already
    at their tokens, as a multi-turn episode's per-turn rewards), minus ``kl_coef * kl[i, t]`` at every
    counted token when ``kl`` is given (the KL folded into the reward).

    rewards: [B]; response_mask, kl, placed: [B, T] -> [B, T].
    """
    outcome = outcome_token_rewards(rewards, response_mask) if placed is None else placed  # [B, T]
    if kl is None:
        return outcome
    return outcome - kl_coef * kl.to(outcome.dtype) * response_mask.to(outcome.dtype)  # [B, T]


@dataclass(frozen=True)
class GroupAlgorithm:
    """GRPO (``scale_by_std``), Dr.GRPO (mean only) or RLOO: outcome advantages within prompt groups
    (the score of a reply is the sum of its token rewards)."""

    name: str
    estimator: str = "grpo"  # "grpo" or "rloo"
    scale_by_std: bool = True
    critic: bool = False

    def advantages(self, rewards: torch.Tensor, response_mask: torch.Tensor, group_ids: Sequence[Hashable],
                   values: torch.Tensor | None, gamma: float, lam: float) -> Advantages:
        """rewards (per token), response_mask: [B, T]; ``values``, ``gamma`` and ``lam`` are unused."""
        if self.estimator == "rloo":
            return rloo_advantages(rewards, response_mask, group_ids)
        return grpo_advantages(rewards, response_mask, group_ids, scale_by_std=self.scale_by_std)


@dataclass(frozen=True)
class ReinforcePlusPlus:
    """REINFORCE++ (Hu, 2025; MAYE): discounted per-token returns whitened over the batch."""

    name: str = "reinforce_pp"
    critic: bool = False

    def advantages(self, rewards: torch.Tensor, response_mask: torch.Tensor, group_ids: Sequence[Hashable],
                   values: torch.Tensor | None, gamma: float, lam: float) -> Advantages:
        """rewards (per token), response_mask: [B, T]; ``values`` and ``lam`` are unused."""
        return reinforce_pp_advantages(rewards, response_mask, gamma)


@dataclass(frozen=True)
class PPO:
    """PPO with a value head (Schulman et al., 2017; mixtrain: the VLM is the actor, a value head on
    its last hidden state the critic): GAE(gamma, lambda) on the rollout's values, whitened; the
    returns are the value targets."""

    name: str = "ppo"
    critic: bool = True

    def advantages(self, rewards: torch.Tensor, response_mask: torch.Tensor, group_ids: Sequence[Hashable],
                   values: torch.Tensor | None, gamma: float, lam: float) -> Advantages:
        """rewards (per token), values, response_mask: [B, T]."""
        if values is None:
            raise ValueError("ppo's advantages need the value head's values at the rollout ([B, T])")
        return gae_advantages(rewards, values, response_mask, gamma, lam)


Algorithm = GroupAlgorithm | ReinforcePlusPlus | PPO

ESTIMATORS: dict[str, Algorithm] = {
    "grpo": GroupAlgorithm("grpo"),
    "dr_grpo": GroupAlgorithm("dr_grpo", scale_by_std=False),
    "rloo": GroupAlgorithm("rloo", estimator="rloo"),
    "reinforce_pp": ReinforcePlusPlus(),
    "ppo": PPO(),
    "dapo": GroupAlgorithm("dapo"),
    "gspo": GroupAlgorithm("gspo"),
}
"""The advantage estimator of each algorithm of ``config.algorithms.ALGORITHMS`` (the same names, in order)."""


def build_algorithm(name: str) -> Algorithm:
    """The estimator of algorithm ``name``; an unknown name is an error listing the known ones."""
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise ValueError(f"unknown RL algorithm {name!r}; known: {', '.join(ESTIMATORS)}") from None
