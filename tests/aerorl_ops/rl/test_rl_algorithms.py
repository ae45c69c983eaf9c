"""The algorithms are configurations of the functional core: hand-computed tiny tensors."""

import pytest
import torch

from aerorl_ops.rl.algorithms import build_algorithm, outcome_token_rewards


def test_outcome_reward_sits_on_the_last_counted_token():
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert torch.equal(outcome_token_rewards(torch.tensor([1.0, 2.0]), mask),
                       torch.tensor([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0]]))


def test_grpo_dr_grpo_and_rloo_advantages_by_hand():
    mask = torch.ones(4, 1)
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0])
    groups = [0, 0, 1, 1]
    grpo = build_algorithm("grpo").advantages(rewards, mask, groups, mask, None, 0.0).advantages[:, 0]
    std = 2 ** -0.5  # unbiased std of (1, 0)
    assert torch.allclose(grpo, torch.tensor([0.5 / (std + 1e-6), -0.5 / (std + 1e-6), 0.0, 0.0]))
    dr = build_algorithm("dr_grpo").advantages(rewards, mask, groups, mask, None, 0.0).advantages[:, 0]
    assert torch.allclose(dr, torch.tensor([0.5, -0.5, 0.0, 0.0]))
    rloo = build_algorithm("rloo").advantages(rewards, mask, groups, mask, None, 0.0).advantages[:, 0]
    assert torch.allclose(rloo, torch.tensor([1.0, -1.0, 0.0, 0.0]))


def test_reinforce_pp_folds_k1_kl_into_the_reward():
    mask = torch.ones(2, 1)
    logprob, ref = torch.tensor([[-1.0], [-1.0]]), torch.tensor([[-2.0], [-1.0]])
    algorithm = build_algorithm("reinforce_pp")
    assert algorithm.kl_in_reward
    # token rewards: 1 - 0.5 * 1 = 0.5 and 0 - 0 = 0; whitened: +-(0.25 / std), std = unbiased of (0.5, 0)
    advantages = algorithm.advantages(torch.tensor([1.0, 0.0]), mask, [0, 1], logprob, ref, 0.5).advantages[:, 0]
    assert torch.allclose(advantages, torch.tensor([0.25, -0.25]) / (0.125 + 1e-8) ** 0.5, atol=1e-5)


def test_an_unknown_algorithm_lists_the_known_ones():
    with pytest.raises(ValueError, match="grpo, dr_grpo, rloo, reinforce_pp"):
        build_algorithm("ppo2")
