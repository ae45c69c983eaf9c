"""RL algorithms as configurations of the functional core (``aerorl_ops.rl.core.functional``).

An algorithm says how advantages are estimated from per-token rewards, whether it trains a value
head (PPO), and its own defaults for the settings a run leaves unset (``AlgorithmSettings``):

==============  ==============================  ============  ==========  ============  =====
algorithm       advantages                      kl_placement  ppo_epochs  entropy_coef  gamma
==============  ==============================  ============  ==========  ============  =====
grpo            group mean / unbiased std       loss          1           0             -
dr_grpo         group mean only                 loss          1           0             -
rloo            leave-one-out group mean        loss          1           0             -
reinforce_pp    discounted returns, whitened    reward        1           0             1.0
ppo             GAE on the value head, whitened reward        4           0.01          0.99
dapo            as grpo                         loss          1           0             -
gspo            as grpo                         loss          1           0             -
==============  ==============================  ============  ==========  ============  =====

PPO's are mixtrain's (clip 0.2, value_coef 0.5 and gae_lambda 0.95 are the plain settings'
defaults). A KL left unset is k3 as a loss term and k1 in the reward (``KL_KIND_BY_PLACEMENT``).

DAPO (Yu et al., 2025) and GSPO (Zheng et al., 2025) are named configurations of GRPO's advantages:

==============  ===========  ==================  ===================  =======  ===================================
algorithm       policy_loss  clip_low/clip_high  loss_agg_mode        kl_coef  also
==============  ===========  ==================  ===================  =======  ===================================
(every other)   ppo          0.2 / 0.2           token-mean           0.04
dapo            ppo          0.2 / 0.28          token-mean           0        dynamic sampling; overlong shaping
                                                                               over the last fifth of the reply
gspo            gspo         3e-4 / 4e-4         seq-mean-token-mean  0
==============  ===========  ==================  ===================  =======  ===================================

DAPO's overlong buffer is the paper's 4096 of 20480 tokens, as a share of ``max_new_tokens``; GSPO's
clips are the paper's (its section 5.1), without a KL as in verl's GSPO recipe.
Everything else is shared: token rewards (``token_rewards``), and the loss (``rl.step.loss.RLLoss``).
Shapes follow the core: ``[B, T]`` over response tokens.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace

import torch

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.rl.core.advantages import (
    Advantages,
    gae_advantages,
    grpo_advantages,
    reinforce_pp_advantages,
    rloo_advantages,
)

KL_KIND_BY_PLACEMENT = {"loss": "k3", "reward": "k1"}
"""``kl_kind`` left unset: k3 (low variance, never negative) as a loss term, as verl's GRPO; k1 (the
log-ratio, whose sum over a reply estimates the sequence KL without bias) in the reward, as verl's
and OpenRLHF's in-reward penalty."""


@dataclass(frozen=True)
class AlgorithmSettings:
    """The settings whose default is the algorithm's (each a ``TrainingSettings`` field of the same name,
    but ``overlong_buffer_share``). An algorithm's ``defaults`` are one of these; :func:`resolved_settings`
    fills a run's unset (None) settings from them. ``kl_kind`` None here means
    ``KL_KIND_BY_PLACEMENT[kl_placement]``."""

    kl_placement: str = "loss"  # "loss": + kl_coef x KL term; "reward": - kl_coef x KL per token in the reward
    kl_kind: str | None = None
    ppo_epochs: int = 1  # passes over each rollout
    entropy_coef: float = 0.0
    gamma: float = 1.0  # discount of per-token returns (reinforce_pp, ppo)
    kl_coef: float = 0.04
    policy_loss: str = "ppo"
    clip_low: float = 0.2
    clip_high: float = 0.2
    loss_agg_mode: str = "token-mean"
    dynamic_sampling: bool = False
    overlong_buffer_share: float = 0.0  # overlong_buffer = this share of max_new_tokens (at least 1 when > 0)


def resolve_settings(defaults: AlgorithmSettings, chosen: Mapping[str, object]) -> AlgorithmSettings:
    """``defaults`` overridden by every value of ``chosen`` that is set (not None), then ``kl_kind``
    by placement if still unset. ``chosen`` maps the field names (e.g. ``asdict`` of a ``TrainingSettings``).

    >>> resolve_settings(ALGORITHMS["ppo"].defaults, {"ppo_epochs": 2, "gamma": None}).ppo_epochs
    2
    """
    settings = replace(defaults, **{f.name: chosen[f.name] for f in fields(AlgorithmSettings)
                                    if chosen.get(f.name) is not None})
    if settings.kl_kind is None:
        settings = replace(settings, kl_kind=KL_KIND_BY_PLACEMENT[settings.kl_placement])
    return settings


def resolved_settings(settings: TrainingSettings) -> TrainingSettings:
    """``settings`` with every algorithm-defaulted setting left unset (None) taken from its algorithm's
    defaults, and ``overlong_buffer`` from the algorithm's share of ``max_new_tokens``: what a run trains with.

    >>> resolved_settings(TrainingSettings(algorithm="dapo", max_new_tokens=10)).overlong_buffer
    2
    """
    defaults = build_algorithm(settings.algorithm).defaults
    chosen = resolve_settings(defaults, asdict(settings))
    overlong = settings.overlong_buffer
    if overlong is None:
        share = defaults.overlong_buffer_share
        overlong = max(1, round(share * settings.max_new_tokens)) if share > 0 else 0
    values = {f.name: getattr(chosen, f.name) for f in fields(AlgorithmSettings) if f.name != "overlong_buffer_share"}
    return replace(settings, overlong_buffer=overlong, **values)


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
    defaults: AlgorithmSettings = AlgorithmSettings()
    critic: bool = False

    def advantages(self, rewards: torch.Tensor, response_mask: torch.Tensor, group_ids: Sequence[Hashable],
                   values: torch.Tensor | None, gamma: float, lam: float) -> Advantages:
        """rewards (per token), response_mask: [B, T]; ``values``, ``gamma`` and ``lam`` are unused."""
        if self.estimator == "rloo":
            return rloo_advantages(rewards, response_mask, group_ids)
        return grpo_advantages(rewards, response_mask, group_ids, scale_by_std=self.scale_by_std)


@dataclass(frozen=True)
class ReinforcePlusPlus:
    """REINFORCE++ (Hu, 2025; MAYE): discounted per-token returns whitened over the batch; the KL in
    the reward by default."""

    name: str = "reinforce_pp"
    defaults: AlgorithmSettings = AlgorithmSettings(kl_placement="reward")
    critic: bool = False

    def advantages(self, rewards: torch.Tensor, response_mask: torch.Tensor, group_ids: Sequence[Hashable],
                   values: torch.Tensor | None, gamma: float, lam: float) -> Advantages:
        """rewards (per token), response_mask: [B, T]; ``values`` and ``lam`` are unused."""
        return reinforce_pp_advantages(rewards, response_mask, gamma)


@dataclass(frozen=True)
class PPO:
    """PPO with a value head (Schulman et al., 2017; mixtrain: the VLM is the actor, a value head on
    its last hidden state the critic): GAE(gamma, lambda) on the rollout's values, whitened; the
    returns are the value targets. The KL in the reward, 4 epochs, entropy bonus 0.01 by default."""

    name: str = "ppo"
    defaults: AlgorithmSettings = AlgorithmSettings(kl_placement="reward", ppo_epochs=4, entropy_coef=0.01,
                                                    gamma=0.99)
    critic: bool = True

    def advantages(self, rewards: torch.Tensor, response_mask: torch.Tensor, group_ids: Sequence[Hashable],
                   values: torch.Tensor | None, gamma: float, lam: float) -> Advantages:
        """rewards (per token), values, response_mask: [B, T]."""
        if values is None:
            raise ValueError("ppo's advantages need the value head's values at the rollout ([B, T])")
        return gae_advantages(rewards, values, response_mask, gamma, lam)


Algorithm = GroupAlgorithm | ReinforcePlusPlus | PPO

ALGORITHMS: dict[str, Algorithm] = {
    "grpo": GroupAlgorithm("grpo"),
    "dr_grpo": GroupAlgorithm("dr_grpo", scale_by_std=False),
    "rloo": GroupAlgorithm("rloo", estimator="rloo"),
    "reinforce_pp": ReinforcePlusPlus(),
    "ppo": PPO(),
    "dapo": GroupAlgorithm("dapo", defaults=AlgorithmSettings(
        kl_coef=0.0, clip_high=0.28, dynamic_sampling=True, overlong_buffer_share=4096 / 20480)),
    "gspo": GroupAlgorithm("gspo", defaults=AlgorithmSettings(
        kl_coef=0.0, policy_loss="gspo", clip_low=3e-4, clip_high=4e-4, loss_agg_mode="seq-mean-token-mean")),
}


def build_algorithm(name: str) -> Algorithm:
    """The algorithm registered as ``name``; an unknown name is an error listing the known ones."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown RL algorithm {name!r}; known: {', '.join(ALGORITHMS)}") from None
