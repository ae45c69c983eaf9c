"""One-step off-policy rollouts (``rollout_mode = "one_step_off"``, ``rl.step.trainer``): the truncated importance
weight and the loss it weighs, by hand; a run at learning rate 0 equals the synchronous one; which weights
sampled which step; what is refused, and the run id of the default."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from aerorl_ops.config.fields import ConfigError
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.registry import make_env
from aerorl_ops.rl.core.functional import truncated_is_weight
from aerorl_ops.rl.run.run_id import training_run_id
from aerorl_ops.rl.step.loss import RLLoss, Targets

LN = math.log


def test_the_truncated_importance_weight_by_hand():
    old = torch.tensor([[LN(0.5), LN(0.5), LN(0.1)]])  # [1, 3] the step's start
    behaviour = torch.tensor([[LN(0.2), LN(0.5), LN(0.4)]])  # [1, 3] the weights that sampled them
    weight = truncated_is_weight(old, behaviour, cap=2.0)  # ratios 2.5 (capped), 1, 0.25
    assert weight[0].tolist() == pytest.approx([2.0, 1.0, 0.25], rel=1e-6)
    assert not weight.requires_grad
    assert truncated_is_weight(old.requires_grad_(), behaviour, cap=3.0)[0].tolist() == pytest.approx(
        [2.5, 1.0, 0.25], rel=1e-6)
    with pytest.raises(ValueError, match="cap must be positive"):
        truncated_is_weight(old, behaviour, cap=0.0)


def loss_of(is_weight: torch.Tensor | None, old: torch.Tensor) -> tuple[float, list[float]]:
    """The loss (ppo, clip 0.2, token-mean, k3 KL x 0.1 in the loss) of the hand-computed step, and its
    gradient to the new log-probs."""
    new = torch.tensor([[LN(0.55), LN(0.45)]], requires_grad=True)  # [1, 2] during the update
    ref = torch.tensor([[LN(0.55), LN(0.9)]])  # [1, 2] the reference
    ones = torch.ones(1, 2)
    loss = RLLoss("token-mean", 0.2, 0.2, 3.0, 0.1, "k3", 0.0, 0.5, 0.5)
    part, _ = loss(new, torch.zeros(1, 2), None, Targets(old, ones, ones, ones, ref, None, is_weight))
    part.weighted.backward()
    return part.value, new.grad[0].tolist()


def test_a_one_step_off_update_by_hand():
    """Behaviour [0.2, 0.5], step start [0.5, 0.5], update [0.55, 0.45], reference [0.55, 0.9] (probabilities
    of the sampled tokens), advantages 1. With rollout_is: ratios to the start 1.1, 0.9 (no clip), weights
    min(2.5, 2) = 2 and 1: policy (-2.2 - 0.9) / 2 = -1.55; k3 KL: 0 and 2 - ln 2 - 1, x 0.1 / 2.
    Gradient: -w x ratio / 2 = -1.1, -0.45, plus the KL's 0.1 / 2 x (1 - 2) = -0.05 at the second token."""
    old = torch.tensor([[LN(0.5), LN(0.5)]])
    behaviour = torch.tensor([[LN(0.2), LN(0.5)]])
    value, grad = loss_of(truncated_is_weight(old, behaviour, 2.0), old)
    assert value == pytest.approx(-1.55 + 0.05 * (1 - LN(2)), rel=1e-6)
    assert grad == pytest.approx([-1.1, -0.5], rel=1e-6)
    # rollout_is = false: the ratio is to the behaviour weights, 2.75 (clipped at 1.2: no gradient) and 0.9
    value, grad = loss_of(None, behaviour)
    assert value == pytest.approx((-1.2 - 0.9) / 2 + 0.05 * (1 - LN(2)), rel=1e-6)
    assert grad == pytest.approx([0.0, -0.5], rel=1e-6, abs=1e-9)


@pytest.fixture
def env():
    return make_env("easy_vqa", split="train", limit=16, seed=1)


def run_steps(tiny_model_dir, env, mode: str, learning_rate: float, steps: int = 3, spy=None):
    from aerorl_ops.rl.runtime.policy import policy_and_reference
    from aerorl_ops.rl.step.trainer import RLTrainer

    torch.set_num_threads(1)
    config = TrainingSettings(group_size=2, prompts_per_step=2, max_new_tokens=3, kl_coef=0.0, seed=3,
                              learning_rate=learning_rate, rollout_mode=mode)
    policy, _ = policy_and_reference(str(tiny_model_dir), config, device="cpu")
    trainer = RLTrainer(config, policy)
    after = [{n: p.detach().clone() for n, p in policy.loaded.model.named_parameters()}]  # weights after step k
    stats = []
    for k in range(steps):
        stats.append(trainer.rl_step(env, [2 * k, 2 * k + 1]))
        after.append({n: p.detach().clone() for n, p in policy.loaded.model.named_parameters()})
    return stats, after


def test_at_learning_rate_0_one_step_off_equals_sync(tiny_model_dir, env):
    sync, _ = run_steps(tiny_model_dir, env, "sync", 0.0)
    off, _ = run_steps(tiny_model_dir, env, "one_step_off", 0.0)
    for field in ("loss", "reward_mean", "accuracy", "entropy", "response_length", "clip_fraction", "grad_norm"):
        assert [getattr(s, field) for s in off] == [getattr(s, field) for s in sync], field
    assert [s.behaviour_step for s in sync] == [0, 1, 2]
    assert [s.behaviour_step for s in off] == [0, 0, 1]


def test_one_step_off_samples_step_k_with_the_weights_after_step_k_minus_2(tiny_model_dir, env, monkeypatch):
    """The model that samples each step's replies holds the weights after step k-2 (k >= 2; step 1: its start)."""
    from aerorl_ops.rl.step import trainer as trainer_module
    from aerorl_ops.rl.step.behaviour import BehaviourWeights

    sampled_with, scored_with = [], []
    original, logprobs = trainer_module.step_rollout, BehaviourWeights.logprobs

    def spying(loaded, *args, **kwargs):
        sampled_with.append({n: p.detach().clone() for n, p in loaded.model.named_parameters()})
        return original(loaded, *args, **kwargs)

    def scoring(self, *args, **kwargs):
        scored_with.append({n: p.detach().clone() for n, p in self.model.named_parameters()})
        return logprobs(self, *args, **kwargs)

    monkeypatch.setattr(trainer_module, "step_rollout", spying)
    monkeypatch.setattr(BehaviourWeights, "logprobs", scoring)
    stats, after = run_steps(tiny_model_dir, env, "one_step_off", 1e-2, steps=4)
    assert [s.behaviour_step for s in stats] == [0, 0, 1, 2]
    moved = [any(not torch.equal(after[k][n], after[k + 1][n]) for n in after[k]) for k in range(4)]
    assert all(moved)  # every update changed the weights, so each step's sampler is told apart
    for k, weights in enumerate(sampled_with, start=1):
        expected = after[max(k - 2, 0)]
        assert weights.keys() == expected.keys()
        assert all(torch.equal(weights[n], expected[n]) for n in expected), f"step {k}"
    assert len(scored_with) == 3  # steps 2 to 4: their behaviour log-probs come from the weights that sampled them
    for k, weights in enumerate(scored_with, start=2):
        assert all(torch.equal(weights[n], after[k - 2][n]) for n in after[k - 2]), f"step {k}"


@pytest.mark.parametrize(("changes", "problem"), [
    ({"rollout_backend": "vllm"}, 'rollout_mode = "one_step_off" samples with a frozen copy of the policy, not a '
     "vLLM engine, yet"),
    ({"nproc_per_node": 2}, 'rollout_mode = "one_step_off" needs nproc_per_node = 1, got 2'),
    ({"algorithm": "gspo"}, "rollout_is weighs the per-token ppo policy loss only, got policy_loss 'gspo'"),
    ({"policy_loss": "cispo"}, "rollout_is weighs the per-token ppo policy loss only, got policy_loss 'cispo'"),
])
def test_what_one_step_off_cannot_do_yet_is_refused_in_one_line(changes, problem):
    settings = dataclasses.replace(TrainingSettings(rollout_mode="one_step_off"), **changes)
    with pytest.raises(ConfigError) as raised:
        settings.check_rules("aerorl train")
    assert str(raised.value).startswith(f"aerorl train: {problem}")
    assert "\n" not in str(raised.value)
    TrainingSettings(rollout_mode="one_step_off", algorithm="gspo", rollout_is=False).check_rules("file")


def test_a_multi_turn_environment_is_refused_at_the_first_step(tiny_model_dir):
    from aerorl_ops.rl.runtime.policy import policy_and_reference
    from aerorl_ops.rl.step.trainer import RLTrainer

    config = TrainingSettings(group_size=2, prompts_per_step=1, max_new_tokens=2, kl_coef=0.0,
                              rollout_mode="one_step_off")
    policy, _ = policy_and_reference(str(tiny_model_dir), config, device="cpu")
    two_tries = make_env("easy_vqa_two_tries", split="train", limit=4, seed=1)
    with pytest.raises(ConfigError, match='one_step_off" cannot train on the multi-turn environment'):
        RLTrainer(config, policy).rl_step(two_tries, [0])


def test_the_default_leaves_run_ids_as_they_were():
    default = TrainingSettings()
    assert training_run_id(dataclasses.replace(default, rollout_mode="sync", rollout_is=True,
                                               rollout_is_cap=2.0)) == training_run_id(default)
    assert training_run_id(dataclasses.replace(default, rollout_mode="one_step_off")) != training_run_id(default)
