"""The algorithms' estimators on the functional core: hand-computed tiny tensors (their settings' defaults:
``tests/aerorl_ops/config/test_recipe.py``)."""

import pytest
import torch

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.rl.core.algorithms import build_algorithm, outcome_token_rewards, token_rewards
from aerorl_ops.rl.core.functional import kl_penalty


def test_outcome_reward_sits_on_the_last_counted_token():
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert torch.equal(outcome_token_rewards(torch.tensor([1.0, 2.0]), mask),
                       torch.tensor([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0]]))


def test_grpo_dr_grpo_and_rloo_advantages_by_hand():
    mask = torch.ones(4, 1)
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0])
    groups = [0, 0, 1, 1]
    grpo = build_algorithm("grpo").advantages(rewards[:, None], mask, groups, None, 1.0, 1.0).advantages[:, 0]
    std = 2 ** -0.5  # unbiased std of (1, 0)
    assert torch.allclose(grpo, torch.tensor([0.5 / (std + 1e-6), -0.5 / (std + 1e-6), 0.0, 0.0]))
    dr = build_algorithm("dr_grpo").advantages(rewards[:, None], mask, groups, None, 1.0, 1.0).advantages[:, 0]
    assert torch.allclose(dr, torch.tensor([0.5, -0.5, 0.0, 0.0]))
    rloo = build_algorithm("rloo").advantages(rewards[:, None], mask, groups, None, 1.0, 1.0).advantages[:, 0]
    assert torch.allclose(rloo, torch.tensor([1.0, -1.0, 0.0, 0.0]))


def test_reinforce_pp_folds_k1_kl_into_the_reward():
    mask = torch.ones(2, 1)
    logprob, ref = torch.tensor([[-1.0], [-1.0]]), torch.tensor([[-2.0], [-1.0]])
    algorithm = build_algorithm("reinforce_pp")
    settings = TrainingSettings(algorithm="reinforce_pp").resolve()
    assert (settings.kl_placement, settings.kl_kind, settings.gamma) == ("reward", "k1", 1.0)
    # token rewards: 1 - 0.5 * 1 = 0.5 and 0 - 0 = 0; whitened: +-(0.25 / std), std = unbiased of (0.5, 0)
    rewards = token_rewards(torch.tensor([1.0, 0.0]), mask, kl_penalty(logprob, ref, settings.kl_kind), 0.5)
    assert torch.equal(rewards, torch.tensor([[0.5], [0.0]]))
    advantages = algorithm.advantages(rewards, mask, [0, 1], None, settings.gamma, 1.0).advantages[:, 0]
    assert torch.allclose(advantages, torch.tensor([0.25, -0.25]) / (0.125 + 1e-8) ** 0.5, atol=1e-5)


def test_kl_in_the_reward_is_charged_at_every_counted_token():
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    kl = torch.tensor([[0.5, -1.0, 9.0]])  # the padding's value never counts
    assert torch.equal(token_rewards(torch.tensor([1.0]), mask, kl, 0.1), torch.tensor([[-0.05, 1.1, 0.0]]))


def test_ppo_uses_gae_on_the_values():
    mask = torch.ones(2, 2)
    rewards = torch.tensor([[0.0, 1.0], [0.0, 0.0]])
    values = torch.tensor([[0.5, 0.5], [0.0, 0.0]])
    # gamma 0.5, lambda 1: row 0 deltas (0 + 0.5*0.5 - 0.5, 1 - 0.5) = (-0.25, 0.5), raw A = (-0.25 + 0.5*0.5, 0.5)
    # = (0, 0.5), returns = A + V = (0.5, 1.0); row 1 all 0
    estimate = build_algorithm("ppo").advantages(rewards, mask, [0, 1], values, 0.5, 1.0)
    assert torch.allclose(estimate.returns, torch.tensor([[0.5, 1.0], [0.0, 0.0]]))
    raw = torch.tensor([0.0, 0.5, 0.0, 0.0])
    assert torch.allclose(estimate.advantages.flatten(), (raw - raw.mean()) / (raw.var() + 1e-8).sqrt(), atol=1e-6)
    with pytest.raises(ValueError, match="value head"):
        build_algorithm("ppo").advantages(rewards, mask, [0, 1], None, 0.5, 1.0)


def test_an_unknown_algorithm_lists_the_known_ones():
    with pytest.raises(ValueError, match="grpo, dr_grpo, rloo, reinforce_pp, ppo"):
        build_algorithm("ppo2")

