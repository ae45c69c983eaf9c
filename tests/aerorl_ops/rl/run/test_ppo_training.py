"""PPO epochs, minibatches, the value head and the loss settings, on the embedded tiny model."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from aerorl_ops.config.training import LOSS_AGG_MODES, TrainingSettings
from aerorl_ops.envs.base import SingleTurnEnv, items_at
from aerorl_ops.envs.registry import make_env
from aerorl_ops.envs.types import StepInfo
from aerorl_ops.eval_runner.episodes import micro_batches, observe_all
from aerorl_ops.eval_runner.replies import encode_observations
from aerorl_ops.rl.runtime.checkpoint_files import VALUE_HEAD, load_checkpoint_state, save_checkpoint
from aerorl_ops.rl.runtime.policy import policy_and_reference
from aerorl_ops.rl.step.loss import Targets
from aerorl_ops.rl.step.sequences import append_completions, completion_tokens
from aerorl_ops.rl.step.step_parts import row_spans
from aerorl_ops.rl.step.trainer import RLTrainer, response_mask
from aerorl_ops.rows.load_result import LoadResult


def parity_grader(item, completion):
    """Reward 1 when the reply's first token id is even: rewards vary even for an untrained model."""
    even = bool(completion.token_ids) and completion.token_ids[0] % 2 == 0
    return float(even), StepInfo({}, even, completion.text)


@pytest.fixture(scope="module")
def env():
    torch.set_num_threads(1)
    items = make_env("easy_vqa", split="train", limit=8, seed=1).items
    return SingleTurnEnv("parity", LoadResult(items=list(items)), parity_grader)


def trainer_for(model_dir, **settings) -> RLTrainer:
    config = TrainingSettings(**{"group_size": 4, "max_new_tokens": 3, "kl_coef": 0.0, "seed": 2, **settings})
    policy, reference = policy_and_reference(str(model_dir), config, device="cpu")
    return RLTrainer(config.resolve(), policy, reference if config.kl_coef > 0 else None)


def test_one_epoch_keeps_the_ratio_at_one_and_two_epochs_move_it(tiny_model_dir, env):
    one = trainer_for(tiny_model_dir, learning_rate=1e-2, clip_low=0.02, clip_high=0.02).rl_step(env, [0, 1])
    assert one.approx_kl == 0.0 and one.clip_fraction == 0.0 and one.dual_clip_fraction == 0.0
    two = trainer_for(tiny_model_dir, learning_rate=1e-2, clip_low=0.02, clip_high=0.02, ppo_epochs=2,
                      ppo_mini_batches=2).rl_step(env, [0, 1])
    assert two.phase == "grpo" and two.reward_std > 0  # the parity reward varies, so advantages are not all 0
    assert two.approx_kl != 0.0 and two.clip_fraction > 0.0
    assert one.value_loss is None and one.explained_variance is None and one.value_clip_fraction is None


def test_a_ppo_step_trains_the_value_head_and_reports_its_stats(tiny_model_dir, env):
    trainer = trainer_for(tiny_model_dir, algorithm="ppo", kl_coef=0.05, quant_bits=16)
    assert (trainer.settings.ppo_epochs, trainer.settings.kl_placement, trainer.settings.kl_kind) == (4, "reward", "k1")
    assert trainer.value_head is not None and not trainer.value_head.linear.weight.any()  # zero-initialised
    stats = trainer.rl_step(env, [0, 1])
    assert stats.phase == "ppo" and trainer.state.step == 1 and not stats.skipped
    assert trainer.value_head.linear.weight.abs().sum() > 0 and trainer.value_head.linear.bias.abs().sum() > 0
    assert stats.value_loss > 0 and 0 <= stats.value_clip_fraction <= 1
    assert stats.explained_variance is not None and stats.explained_variance <= 1
    assert stats.approx_kl != 0.0 and stats.kl is not None
    held = {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}
    assert {id(p) for p in trainer.value_head.parameters()} <= held  # the same optimizer


def test_the_value_head_is_saved_with_the_checkpoint_and_restored_on_resume(tiny_model_dir, env, tmp_path):
    trainer = trainer_for(tiny_model_dir, algorithm="ppo", ppo_epochs=1)
    trainer.rl_step(env, [0])
    loaded = trainer.policy.loaded
    save_checkpoint(tmp_path / "step-1", loaded, trainer.optimizer, trainer.state.step, "ref",
                    value_head=trainer.value_head)
    assert (tmp_path / "step-1" / VALUE_HEAD).exists()
    state = load_checkpoint_state(tmp_path / "step-1")
    resumed = trainer_for(tmp_path / "step-1", algorithm="ppo", ppo_epochs=1)
    resumed.restore(state)
    assert resumed.state.step == 1
    hidden = torch.randn(5, trainer.value_head.linear.in_features)  # [N, H]
    assert torch.equal(resumed.value_head(hidden), trainer.value_head(hidden))
    assert resumed.value_head(hidden).abs().sum() > 0
    moments = [trainer.optimizer.state_dict()["state"], resumed.optimizer.state_dict()["state"]]
    assert moments[0].keys() == moments[1].keys()
    grpo = trainer_for(tiny_model_dir)
    save_checkpoint(tmp_path / "grpo", grpo.policy.loaded, grpo.optimizer, 0, "ref", value_head=grpo.value_head)
    assert grpo.value_head is None and load_checkpoint_state(tmp_path / "grpo").value_head is None


COMPLETION_LENGTHS = (1, 2, 4, 3, 1, 2)


def batches_of(loaded, env, completions, parts):
    """The rows of ``completions`` (one per item 0, 1, ...) as ``parts`` micro-batches."""
    batches = []
    for rows in micro_batches(list(range(len(completions))), parts):
        inputs = encode_observations(loaded, observe_all(env, items_at(env, rows)))
        batches.append(append_completions(inputs, [completions[r] for r in rows], loaded))
    return batches


@pytest.fixture(scope="module")
def ppo_trainer(tiny_model_dir):
    trainer = trainer_for(tiny_model_dir, algorithm="ppo", kl_coef=0.1, kl_placement="loss")
    with torch.no_grad():  # a non-zero head, so the value loss reaches the decoder
        trainer.value_head.linear.weight.copy_(torch.linspace(-0.1, 0.1, trainer.value_head.linear.in_features))
    return trainer


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_accumulated_update_gradient_equals_the_one_batch_gradient(ppo_trainer, env, mode, monkeypatch):
    trainer = ppo_trainer
    trainer.loss = dataclasses.replace(trainer.loss, agg_mode=mode)
    loaded = trainer.policy.loaded
    completions = [[7 + 3 * row + t for t in range(n)] for row, n in enumerate(COMPLETION_LENGTHS)]
    whole, parts = batches_of(loaded, env, completions, 1), batches_of(loaded, env, completions, 3)
    mask = response_mask(torch.tensor(COMPLETION_LENGTHS), max(COMPLETION_LENGTHS))  # [6, 4]
    with torch.no_grad():
        scored = completion_tokens(loaded.model, whole[0])
    old = torch.zeros(mask.shape).masked_scatter(mask.bool(), scored.logprobs)  # [6, 4]
    shift = torch.linspace(-0.3, 0.3, mask.numel()).reshape(mask.shape) * mask  # ratios away from 1: clips bind
    targets = Targets(old + shift, torch.linspace(-1.0, 1.5, mask.numel()).reshape(mask.shape) * mask,
                      torch.linspace(0.0, 2.0, mask.numel()).reshape(mask.shape) * mask, mask, old - 0.2 * mask,
                      torch.zeros(mask.shape))
    grads = []

    def capture(loss):
        params = [p for group in trainer.optimizer.param_groups for p in group["params"]]
        grads.append([p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in params])
        trainer.optimizer.zero_grad(set_to_none=True)
        return 0.0, False

    monkeypatch.setattr(trainer, "_optimizer_step", capture)
    one = trainer._update([(whole[0], slice(0, 6))], targets, mask)
    three = trainer._update(list(zip(parts, row_spans(parts), strict=True)), targets, mask)
    assert len(three.passes) == 3 and one.loss == pytest.approx(three.loss, rel=1e-5)
    assert one.value_loss == pytest.approx(three.value_loss, rel=1e-5)
    norm = max(float(g.abs().max()) for g in grads[0])
    assert norm > 0
    assert max(float((a - b).abs().max()) for a, b in zip(*grads, strict=True)) < 1e-5 * norm
