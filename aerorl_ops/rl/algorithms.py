"""RL objectives, one class per algorithm, chosen by ``AeroRLConfig.algorithm``.

Inputs are flattened over the N counted completion tokens of a batch (row-major, see
``aerorl_ops.rl.sequences``): ``logprobs`` [N] under the policy being trained (with grad),
``old_logprobs`` [N] under the policy that sampled, ``ref_logprobs`` [N] under the frozen
reference; ``rewards`` [B] one scalar per sequence; ``mask`` [B, T'] the counted positions.
Each returns the loss and detached :class:`ObjectiveStats`.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from aerorl_ops.losses import masked_mean

ADVANTAGE_EPS = 1e-6


class ObjectiveStats(NamedTuple):
    policy_loss: float
    kl: float
    clip_fraction: float
    advantage_mean: float
    advantage_std: float


def _token_mean(values: torch.Tensor) -> torch.Tensor:
    """Mean over the flattened counted tokens (every position of ``values`` counts); 0 when empty."""
    return masked_mean(values, torch.ones_like(values, dtype=torch.bool))


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(policy || reference) per token: e^d - d - 1, d = ref - policy.

    Non-negative and unbiased. logprobs, ref_logprobs: [N] -> [N]
    """
    delta = ref_logprobs - logprobs  # [N]
    return torch.exp(delta) - delta - 1.0  # [N]


def clipped_surrogate(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
                      clip_eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped objective per token (to minimise) and whether each token was clipped. All [N]."""
    ratio = torch.exp(logprobs - old_logprobs)  # [N]
    unclipped = ratio * advantages  # [N]
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages  # [N]
    return -torch.minimum(unclipped, clipped), (unclipped != clipped).detach()  # [N], [N]


class GRPO:
    """Group Relative Policy Optimization (Shao et al., 2024, DeepSeekMath).

    Each prompt is sampled ``group_size`` times; a sequence's advantage is its reward
    normalised by its group's mean and std. Loss per token: clipped importance-ratio surrogate
    plus ``kl_coef`` x k3 KL to the reference, averaged over all counted tokens (token-mean).
    """

    def __init__(self, group_size: int, clip_eps: float = 0.2, kl_coef: float = 0.04) -> None:
        self.group_size = group_size
        self.clip_eps = clip_eps
        self.kl_coef = kl_coef

    def advantages(self, rewards: torch.Tensor) -> torch.Tensor:
        """rewards: [B] with B = prompts x group_size, groups contiguous -> [B]."""
        grouped = rewards.view(-1, self.group_size)  # [P, G]
        mean = grouped.mean(dim=1, keepdim=True)  # [P, 1]
        std = grouped.std(dim=1, unbiased=False, keepdim=True)  # [P, 1]
        return ((grouped - mean) / (std + ADVANTAGE_EPS)).view(-1)  # [B]

    def loss(self, logprobs: torch.Tensor, old_logprobs: torch.Tensor, ref_logprobs: torch.Tensor,
             rewards: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, ObjectiveStats]:
        sequence_advantages = self.advantages(rewards)  # [B]
        advantages = sequence_advantages[:, None].expand(mask.shape)[mask]  # [N]
        surrogate, clipped = clipped_surrogate(logprobs, old_logprobs, advantages, self.clip_eps)  # [N], [N]
        kl = k3_kl(logprobs, ref_logprobs)  # [N]
        loss = _token_mean(surrogate + self.kl_coef * kl)  # []
        return loss, ObjectiveStats(
            policy_loss=float(_token_mean(surrogate).detach()),
            kl=float(_token_mean(kl).detach()),
            clip_fraction=float(_token_mean(clipped.float())),
            advantage_mean=float(sequence_advantages.mean()),
            advantage_std=float(sequence_advantages.std(unbiased=False)),
        )


class ReinforcePlusPlus:
    """REINFORCE++ as used by MAYE (Ma et al., 2025, "Rethinking RL Scaling for VLMs").

    The KL to the reference is folded into the reward: every token gets -kl_coef x (old - ref)
    log-ratio, the sequence reward is added at its last token, and each token's return is the
    sum of what follows it (gamma = 1). Returns are normalised over the whole batch (no groups,
    no critic). Loss: the clipped surrogate, token-mean; no separate KL term.
    """

    def __init__(self, clip_eps: float = 0.2, kl_coef: float = 0.04) -> None:
        self.clip_eps = clip_eps
        self.kl_coef = kl_coef

    def token_returns(self, old_logprobs: torch.Tensor, ref_logprobs: torch.Tensor, rewards: torch.Tensor,
                      mask: torch.Tensor) -> torch.Tensor:
        """Return-to-go of each counted token: [N]."""
        per_token = torch.zeros(mask.shape, dtype=old_logprobs.dtype, device=old_logprobs.device)  # [B, T']
        per_token[mask] = -self.kl_coef * (old_logprobs - ref_logprobs).detach()
        to_go = per_token.flip(1).cumsum(1).flip(1)  # [B, T']
        return (to_go + rewards[:, None])[mask]  # [N]

    def loss(self, logprobs: torch.Tensor, old_logprobs: torch.Tensor, ref_logprobs: torch.Tensor,
             rewards: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, ObjectiveStats]:
        returns = self.token_returns(old_logprobs, ref_logprobs, rewards, mask)  # [N]
        advantages = (returns - returns.mean()) / (returns.std(unbiased=False) + ADVANTAGE_EPS)  # [N]
        surrogate, clipped = clipped_surrogate(logprobs, old_logprobs, advantages, self.clip_eps)  # [N], [N]
        loss = _token_mean(surrogate)  # []
        return loss, ObjectiveStats(
            policy_loss=float(loss.detach()),
            kl=float(_token_mean(k3_kl(logprobs, ref_logprobs)).detach()),
            clip_fraction=float(_token_mean(clipped.float())),
            advantage_mean=float(advantages.mean()) if advantages.numel() else 0.0,
            advantage_std=float(advantages.std(unbiased=False)) if advantages.numel() else 0.0,
        )


def build_algorithm(config) -> GRPO | ReinforcePlusPlus:
    """The objective ``config.algorithm`` names (config is an ``AeroRLConfig``)."""
    builders = {
        "grpo": lambda: GRPO(config.group_size, config.clip_eps, config.kl_coef),
        "reinforce_pp": lambda: ReinforcePlusPlus(config.clip_eps, config.kl_coef),
    }
    return builders[config.algorithm]()
