"""The RL algorithms by name, each with its defaults for the settings a run leaves unset, written once.

``TrainingSettings.resolve()`` (``config.training``) fills a run's unset settings from here into its
``Recipe``; the algorithms' advantage estimators are ``rl.core.algorithms.ESTIMATORS``, keyed by the
same names, and the policy losses ``rl.core.registry``'s, registered under ``POLICY_LOSSES``' names.

==============  ============  ==========  ============  =====
algorithm       kl_placement  ppo_epochs  entropy_coef  gamma
==============  ============  ==========  ============  =====
grpo            loss          1           0             -
dr_grpo         loss          1           0             -
rloo            loss          1           0             -
reinforce_pp    reward        1           0             1.0
ppo             reward        4           0.01          0.99
dapo            loss          1           0             -
gspo            loss          1           0             -
==============  ============  ==========  ============  =====

PPO's are mixtrain's (clip 0.2, value_coef 0.5 and gae_lambda 0.95 are the plain settings'
defaults). A KL kind left unset is k3 as a loss term and k1 in the reward (``KL_KIND_BY_PLACEMENT``).

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

No torch here: ``aerorl -h`` and the config checks import this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

GROUP_ALGORITHMS = ("grpo", "dr_grpo", "rloo", "dapo", "gspo")
"""The algorithms whose advantages are relative within a prompt's group of replies (group_size >= 2)."""

POLICY_LOSSES = ("ppo", "gspo", "gmpo", "sapo", "cispo")
"""The policy losses a run may name: PPO's clipped surrogate, and GSPO's, GMPO's, SAPO's, CISPO's. Each is
registered under its name in ``rl.core.registry`` (a test holds the two to the same names)."""

KL_KIND_BY_PLACEMENT = {"loss": "k3", "reward": "k1"}
"""``kl_kind`` left unset: k3 (low variance, never negative) as a loss term, as verl's GRPO; k1 (the
log-ratio, whose sum over a reply estimates the sequence KL without bias) in the reward, as verl's
and OpenRLHF's in-reward penalty."""


@dataclass(frozen=True)
class AlgorithmDefaults:
    """An algorithm's value of each setting whose default is the algorithm's (a ``TrainingSettings`` field
    of the same name, but ``overlong_buffer_share``; ``kl_kind`` follows the placement: ``KL_KIND_BY_PLACEMENT``)."""

    kl_placement: str = "loss"  # "loss": + kl_coef x KL term; "reward": - kl_coef x KL per token in the reward
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


ALGORITHM_DEFAULTS: dict[str, AlgorithmDefaults] = {
    "grpo": AlgorithmDefaults(),
    "dr_grpo": AlgorithmDefaults(),
    "rloo": AlgorithmDefaults(),
    "reinforce_pp": AlgorithmDefaults(kl_placement="reward"),
    "ppo": AlgorithmDefaults(kl_placement="reward", ppo_epochs=4, entropy_coef=0.01, gamma=0.99),
    "dapo": AlgorithmDefaults(kl_coef=0.0, clip_high=0.28, dynamic_sampling=True,
                              overlong_buffer_share=4096 / 20480),
    "gspo": AlgorithmDefaults(kl_coef=0.0, policy_loss="gspo", clip_low=3e-4, clip_high=4e-4,
                              loss_agg_mode="seq-mean-token-mean"),
}

ALGORITHMS = tuple(ALGORITHM_DEFAULTS)
"""The algorithms a run may name, in the table's order."""

ALGORITHM_SETTINGS = ("kl_coef", "kl_kind", "kl_placement", "loss_agg_mode", "policy_loss", "ppo_epochs",
                      "clip_low", "clip_high", "entropy_coef", "gamma", "dynamic_sampling", "overlong_buffer")
"""The settings whose default is the algorithm's: unset (None) in ``TrainingSettings``, filled in its
``Recipe``."""


def algorithm_defaults(algorithm: str) -> AlgorithmDefaults:
    """The defaults of ``algorithm``; an unknown name is a ValueError listing the known ones."""
    try:
        return ALGORITHM_DEFAULTS[algorithm]
    except KeyError:
        raise ValueError(f"unknown RL algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}") from None


def algorithm_values(algorithm: str, chosen: Mapping[str, object], max_new_tokens: int) -> dict[str, object]:
    """Each of ``ALGORITHM_SETTINGS``: ``chosen``'s value where set (not None), else ``algorithm``'s default;
    ``kl_kind`` by the placement (``KL_KIND_BY_PLACEMENT``), ``overlong_buffer`` the algorithm's share of
    ``max_new_tokens`` (at least 1 when the share is not 0).

    >>> values = algorithm_values("dapo", {"clip_high": 0.3}, max_new_tokens=10)
    >>> values["clip_high"], values["kl_coef"], values["kl_kind"], values["overlong_buffer"]
    (0.3, 0.0, 'k3', 2)
    """
    defaults = algorithm_defaults(algorithm)
    values = {f.name: chosen[f.name] if chosen.get(f.name) is not None else getattr(defaults, f.name)
              for f in fields(AlgorithmDefaults) if f.name != "overlong_buffer_share"}
    kind = chosen.get("kl_kind")
    overlong = chosen.get("overlong_buffer")
    if overlong is None:
        share = defaults.overlong_buffer_share
        overlong = max(1, round(share * max_new_tokens)) if share > 0 else 0
    values.update(kl_kind=KL_KIND_BY_PLACEMENT[values["kl_placement"]] if kind is None else kind,
                  overlong_buffer=overlong)
    return {name: values[name] for name in ALGORITHM_SETTINGS}
