"""GRPO and REINFORCE++ objectives on hand-computed tensors."""

import math

import pytest
import torch

from aerorl_ops.rl.algorithms import GRPO, ReinforcePlusPlus, build_algorithm, clipped_surrogate, k3_kl
from aerorl_ops.rl.config import AeroRLConfig


def test_grpo_advantages_are_normalised_within_each_group():
    rewards = torch.tensor([1.0, 0.0, 3.0, 3.0])  # groups (1, 0) and (3, 3)
    advantages = GRPO(group_size=2).advantages(rewards)
    # group 1: mean .5, std .5 -> (+1, -1); group 2: std 0 -> 0 / (0 + eps) = 0
    assert advantages.tolist() == pytest.approx([1.0, -1.0, 0.0, 0.0], abs=1e-5)


def test_k3_kl_matches_its_formula_and_is_zero_at_equality():
    logprobs = torch.tensor([-1.0, -2.0])
    ref = torch.tensor([-1.0, -1.5])
    kl = k3_kl(logprobs, ref)
    assert kl[0].item() == 0.0
    assert kl[1].item() == pytest.approx(math.exp(0.5) - 0.5 - 1.0, rel=1e-6)


def test_clipped_surrogate_clips_ratio_above_one_plus_eps_for_positive_advantage():
    logprobs = torch.log(torch.tensor([1.5, 1.0]))  # ratios 1.5 and 1.0 against old = 0
    old = torch.zeros(2)
    loss, clipped = clipped_surrogate(logprobs, old, torch.tensor([2.0, -1.0]), clip_eps=0.2)
    assert loss.tolist() == pytest.approx([-2.4, 1.0])  # -min(1.5*2, 1.2*2), -min(-1, -1)
    assert clipped.tolist() == [True, False]


def test_grpo_loss_is_token_mean_of_surrogate_plus_kl():
    mask = torch.tensor([[True, True], [True, False]])  # 3 counted tokens; rows 0 and 1 form one group
    rewards = torch.tensor([1.0, 0.0])  # advantages +1, -1
    logprobs = torch.tensor([-1.0, -1.0, -1.0], requires_grad=True)
    old = logprobs.detach().clone()
    ref = torch.tensor([-1.0, -0.5, -1.0])
    loss, stats = GRPO(group_size=2, clip_eps=0.2, kl_coef=0.1).loss(logprobs, old, ref, rewards, mask)
    kl_token = math.exp(0.5) - 0.5 - 1.0
    expected = ((-1.0) + (-1.0) + (1.0) + 0.1 * kl_token) / 3  # surrogate -A per token at ratio 1
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    assert stats.kl == pytest.approx(kl_token / 3, rel=1e-5)
    assert stats.clip_fraction == 0.0
    loss.backward()
    # d/dlogp of -ratio*A at ratio 1 is -A; KL term d/dlogp (e^d - d - 1) = -(e^d - 1) with d = ref - logp
    assert logprobs.grad.tolist() == pytest.approx(
        [-1 / 3, (-1 - 0.1 * (math.exp(0.5) - 1)) / 3, 1 / 3], rel=1e-5)


def test_reinforce_pp_folds_kl_into_the_return_to_go():
    algorithm = ReinforcePlusPlus(clip_eps=0.2, kl_coef=0.5)
    mask = torch.tensor([[True, True, False], [True, False, False]])
    old = torch.tensor([-1.0, -2.0, -1.0])
    ref = torch.tensor([-1.5, -2.0, -0.5])  # per-token KL penalties: -0.5*0.5, 0, -0.5*(-0.5)
    returns = algorithm.token_returns(old, ref, torch.tensor([1.0, 0.0]), mask)
    assert returns.tolist() == pytest.approx([1.0 - 0.25, 1.0, 0.25])


def test_build_algorithm_follows_the_config():
    assert isinstance(build_algorithm(AeroRLConfig(algorithm="grpo")), GRPO)
    assert isinstance(build_algorithm(AeroRLConfig(algorithm="reinforce_pp")), ReinforcePlusPlus)
