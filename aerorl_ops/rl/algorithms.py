"""RL algorithms as configurations of the functional core (``aerorl_ops.rl.functional``).

An algorithm says only how advantages are estimated and whether the KL to the reference is a
loss term (GRPO family: ``kl_coef`` x k3 added to the token-mean loss) or folded into the
per-token reward (REINFORCE++: ``-kl_coef`` x k1 at every token). The loss itself is always
``functional.policy_loss``. Shapes follow the core: ``[B, T]`` over response tokens.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch

from aerorl_ops.rl.functional import (
    Advantages,
    grpo_advantages,
    kl_penalty,
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
    token_rewards[rows, last[rows]] = rewards[rows]
    return token_rewards


@dataclass(frozen=True)
class GroupAlgorithm:
    """GRPO (``scale_by_std``), Dr.GRPO (mean only) or RLOO: outcome advantages within prompt groups."""

    name: str
    estimator: str = "grpo"  # "grpo" or "rloo"
    scale_by_std: bool = True
    kl_in_reward: bool = False

    def advantages(self, rewards: torch.Tensor, response_mask: torch.Tensor, group_ids: Sequence[Hashable],
                   logprob: torch.Tensor, ref_logprob: torch.Tensor | None, kl_coef: float) -> Advantages:
        token_rewards = outcome_token_rewards(rewards, response_mask)  # [B, T]
        if self.estimator == "rloo":
            return rloo_advantages(token_rewards, response_mask, group_ids)
        return grpo_advantages(token_rewards, response_mask, group_ids, scale_by_std=self.scale_by_std)


@dataclass(frozen=True)
class ReinforcePlusPlus:
    """REINFORCE++ (Hu, 2025; MAYE): -kl_coef x k1 per token plus the outcome reward, discounted
    returns whitened over the batch; no KL loss term."""

    name: str = "reinforce_pp"
    gamma: float = 1.0
    kl_in_reward: bool = True

    def advantages(self, rewards: torch.Tensor, response_mask: torch.Tensor, group_ids: Sequence[Hashable],
                   logprob: torch.Tensor, ref_logprob: torch.Tensor | None, kl_coef: float) -> Advantages:
        token_rewards = outcome_token_rewards(rewards, response_mask)  # [B, T]
        if ref_logprob is not None and kl_coef > 0:
            token_rewards = token_rewards - kl_coef * kl_penalty(logprob, ref_logprob, "k1") * response_mask  # [B, T]
        return reinforce_pp_advantages(token_rewards, response_mask, self.gamma)


Algorithm = GroupAlgorithm | ReinforcePlusPlus

ALGORITHMS: dict[str, Algorithm] = {
    "grpo": GroupAlgorithm("grpo"),
    "dr_grpo": GroupAlgorithm("dr_grpo", scale_by_std=False),
    "rloo": GroupAlgorithm("rloo", estimator="rloo"),
    "reinforce_pp": ReinforcePlusPlus(),
}


def build_algorithm(name: str) -> Algorithm:
    """The algorithm registered as ``name``; an unknown name is an error listing the known ones."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown RL algorithm {name!r}; known: {', '.join(ALGORITHMS)}") from None
