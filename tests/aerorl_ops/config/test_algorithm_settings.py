"""The RL algorithm settings of ``[training]``: checks that name the setting, unset = the algorithm's default."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from aerorl_ops.config.algorithms import ALGORITHM_DEFAULTS, ALGORITHMS, GROUP_ALGORITHMS
from aerorl_ops.config.fields import ConfigError, checked, help_of
from aerorl_ops.config.training import (
    KL_KINDS,
    LOSS_AGG_MODES,
    TRAINING_DEFAULTS,
    TrainingSettings,
)
from aerorl_ops.rl.core.algorithms import ESTIMATORS, GroupAlgorithm
from aerorl_ops.rl.core.functional import AGGREGATORS, kl_penalty
from aerorl_ops.rl.step.trainer import RLTrainer


@pytest.mark.parametrize(("name", "value", "problem"), [
    ("kl_kind", "k4", "must be one of"),
    ("kl_placement", "both", "must be one of"),
    ("loss_agg_mode", "seq-sum", "must be one of"),
    ("ppo_epochs", 0, "must be a positive integer"),
    ("ppo_mini_batches", 0, "must be a positive integer"),
    ("clip_low", 1.0, r"must be in \(0, 1\)"),
    ("clip_low", 0.0, r"must be in \(0, 1\)"),
    ("clip_high", -0.2, r"must be in \(0, 1\)"),
    ("dual_clip_c", 1.0, "must be > 1"),
    ("entropy_coef", -0.01, "must be >= 0"),
    ("gamma", 1.5, r"must be in \[0, 1\]"),
    ("value_clip", 0.0, "must be > 0"),
])
def test_a_bad_algorithm_setting_names_the_setting(name, value, problem):
    with pytest.raises(ConfigError, match=rf"setting 'training.{name}' {problem}"):
        checked(TrainingSettings, "run config", "training", {name: value})


def test_unset_settings_are_valid_and_take_the_algorithms_defaults():
    assert all(getattr(TRAINING_DEFAULTS, name) is None
               for name in ("kl_kind", "kl_placement", "ppo_epochs", "entropy_coef", "gamma", "kl_coef", "clip_low",
                            "clip_high", "loss_agg_mode", "policy_loss", "dynamic_sampling", "overlong_buffer"))
    assert checked(TrainingSettings, "run config", "training", {"ppo_epochs": None}).ppo_epochs is None
    given = dataclasses.replace(TRAINING_DEFAULTS, algorithm="ppo")
    ppo = RLTrainer(given.resolve())
    assert (given.ppo_epochs, given.entropy_coef, given.gamma) == (None, None, None)
    assert (ppo.settings.ppo_epochs, ppo.settings.entropy_coef, ppo.settings.gamma) == (4, 0.01, 0.99)  # the trainer's
    chosen = RLTrainer(dataclasses.replace(TRAINING_DEFAULTS, ppo_epochs=3, kl_kind="k2", clip_high=0.28,
                                           loss_agg_mode="seq-mean-token-mean").resolve())
    assert (chosen.settings.ppo_epochs, chosen.settings.kl_kind, chosen.loss.clip_high, chosen.loss.agg_mode) == (
        3, "k2", 0.28, "seq-mean-token-mean")


def test_the_named_choices_are_the_functional_cores():
    assert LOSS_AGG_MODES == tuple(AGGREGATORS)
    assert ALGORITHMS == tuple(ESTIMATORS)
    assert GROUP_ALGORITHMS == tuple(name for name, estimator in ESTIMATORS.items()
                                     if isinstance(estimator, GroupAlgorithm))
    logprob, ref = torch.tensor([[-1.0]]), torch.tensor([[-2.0]])
    for kind in KL_KINDS:
        assert kl_penalty(logprob, ref, kind).shape == (1, 1)


def test_the_help_quotes_ppos_own_defaults():
    """The help of an unset-by-default setting names ppo's default; the value itself lives in config.algorithms."""
    ppo = ALGORITHM_DEFAULTS["ppo"]
    for name in ("ppo_epochs", "entropy_coef", "gamma"):
        assert f"({getattr(ppo, name):g} for ppo" in help_of(TrainingSettings, name)
    assert f"({ppo.kl_placement} for reinforce_pp and ppo" in help_of(TrainingSettings, "kl_placement")
