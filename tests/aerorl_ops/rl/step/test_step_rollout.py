"""An RL step's rollout (``rl.step.rollout_rounds``): DAPO's dynamic sampling, its rounds and counts, the
rebuilt batch, overlong shaping; and the trainer's use of them (``mask_truncated``, the step's record)."""

from __future__ import annotations

import dataclasses
import logging

import pytest
import torch

from aerorl_ops.config.training import Recipe, TrainingSettings
from aerorl_ops.envs.base import SingleTurnEnv
from aerorl_ops.envs.registry import make_env
from aerorl_ops.envs.types import StepInfo
from aerorl_ops.rl.runtime.distributed import SINGLE
from aerorl_ops.rl.step.rollout_rounds import GroupCounts, informative_groups, shaped_rewards, step_rollout
from aerorl_ops.rows.load_result import LoadResult

GROUP = 2
UNIFORM = (0, 1, 2, 3)
"""Items whose every reply earns 1: their groups are uninformative. The others alternate 0, 1, 0, 1
over the replies graded (so each group of 2 holds a 0 and a 1)."""


class AlternatingGrader:
    """Reward 1 for an item of ``UNIFORM``; else 0 and 1 in turn, whatever the reply."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, item, completion):
        if int(item.item_id.rsplit("-", 1)[-1]) in UNIFORM:
            return 1.0, StepInfo({}, True, completion.text)
        self.calls += 1
        return float(self.calls % 2 == 0), StepInfo({}, self.calls % 2 == 0, completion.text)


@pytest.fixture
def env():
    items = [dataclasses.replace(item, item_id=f"item-{k}")
             for k, item in enumerate(make_env("easy_vqa", split="train", limit=8, seed=1).items)]
    return SingleTurnEnv("alternating", LoadResult(items=items), AlternatingGrader())


def settings(**changes) -> Recipe:
    return TrainingSettings(algorithm="dapo", group_size=GROUP, prompts_per_step=2, max_new_tokens=3,
                            **changes).resolve()


def seed_of(part: int) -> int:
    return 1000 + part


def test_informative_groups_are_those_whose_rewards_differ():
    assert informative_groups(torch.tensor([1.0, 1.0, 0.0, 1.0, 0.5, 0.5]), 2) == [False, True, False]


def test_the_overlong_penalty_is_added_only_with_a_buffer():
    rewards, lengths = torch.tensor([1.0, 1.0, 1.0]), torch.tensor([2, 3, 4])
    # max 4, buffer 2: the penalty starts after 2 tokens, -(L - 2) / 2 x 0.5
    shaped = shaped_rewards(rewards, lengths, dataclasses.replace(settings(), max_new_tokens=4, overlong_buffer=2,
                                                                  overlong_penalty_factor=0.5))
    assert shaped.tolist() == [1.0, 0.75, 0.5]
    assert torch.equal(shaped_rewards(rewards, lengths, dataclasses.replace(settings(), overlong_buffer=0)), rewards)


def test_without_dynamic_sampling_one_round_keeps_every_group(tiny_vlm, env):
    rollout = step_rollout(tiny_vlm, env, [0, 4], settings(dynamic_sampling=False), SINGLE, seed_of)
    assert rollout.groups == GroupCounts(sampled=2, kept=2, dropped=0, rounds=1, filled=0)
    assert rollout.group_ids == [0, 0, 4, 4]
    assert [item.item_id for item in rollout.items] == ["item-0", "item-0", "item-4", "item-4"]


def test_uninformative_groups_are_replaced_by_the_next_rounds_informative_ones(tiny_vlm, env):
    rounds = {1: [1, 5], 2: [6, 7]}
    rollout = step_rollout(tiny_vlm, env, [0, 4], settings(overlong_buffer=0), SINGLE, seed_of, None,
                           rounds.__getitem__)
    # round 0: item 0's group is uniform (dropped), item 4's kept; round 1: item 1 dropped, item 5 kept
    assert rollout.groups == GroupCounts(sampled=4, kept=2, dropped=2, rounds=2, filled=0)
    assert rollout.group_ids == [4, 4, 5, 5]
    assert [item.item_id for item in rollout.items] == ["item-4", "item-4", "item-5", "item-5"]
    assert rollout.outcomes.rewards.tolist() == [0.0, 1.0, 0.0, 1.0]
    rows = sum(batch.input_ids.shape[0] for batch in rollout.batches)
    assert rows == 4 and rollout.lengths.shape == (4,)
    for batch in rollout.batches:  # the rebuilt batch holds each reply: its completion ends where its length says
        assert batch.completion_mask.sum(dim=1).tolist() == [int(n) for n in rollout.lengths[:len(batch.input_ids)]]


def test_when_the_rounds_run_out_the_step_goes_ahead_and_says_so(tiny_vlm, env, caplog):
    with caplog.at_level(logging.WARNING, logger="aerorl_ops.rl.step.rollout_rounds"):
        rollout = step_rollout(tiny_vlm, env, [0, 1], settings(max_sampling_rounds=2), SINGLE, seed_of, None,
                               {1: [2, 4]}.__getitem__)
    # round 0: both uniform; round 1: item 2 uniform, item 4 informative -> 1 kept, 1 filled (item 0's group)
    assert rollout.groups == GroupCounts(sampled=4, kept=1, dropped=2, rounds=2, filled=1)
    assert rollout.group_ids == [0, 0, 4, 4]  # sampling order
    assert [item.item_id for item in rollout.items] == ["item-0", "item-0", "item-4", "item-4"]
    assert "1 of 2 groups informative after 2 sampling rounds" in caplog.text


def test_without_more_prompts_there_is_one_round(tiny_vlm, env):
    rollout = step_rollout(tiny_vlm, env, [0, 4], settings(), SINGLE, seed_of)
    assert rollout.groups == GroupCounts(sampled=2, kept=1, dropped=0, rounds=1, filled=1)
    assert rollout.group_ids == [0, 0, 4, 4]


def test_round_zero_samples_as_without_dynamic_sampling(tiny_vlm, env):
    plain = step_rollout(tiny_vlm, env, [4, 5], settings(dynamic_sampling=False), SINGLE, seed_of)
    dynamic = step_rollout(tiny_vlm, env, [4, 5], settings(), SINGLE, seed_of, None, {1: [6, 7]}.__getitem__)
    assert dynamic.groups.rounds == 1 and dynamic.batches[0] is not plain.batches[0]
    assert torch.equal(dynamic.batches[0].input_ids, plain.batches[0].input_ids)


def test_mask_truncated_leaves_cut_replies_out_of_the_loss_and_the_step_records_its_groups(tiny_model_dir, env,
                                                                                        tmp_path):
    """Replies of at most 1 token are cut (the tiny model's first token is not EOS here): with
    mask_truncated nothing is left to train on; without it the alternating rewards give a gradient."""
    from functools import partial

    import duckdb

    from aerorl_ops.rl.record.recorder import RunRecorder
    from aerorl_ops.rl.runtime.policy import policy_and_reference
    from aerorl_ops.rl.step.trainer import RLTrainer

    torch.set_num_threads(1)
    steps = {}
    for masked in (False, True):
        config = TrainingSettings(algorithm="dapo", group_size=GROUP, prompts_per_step=2, max_new_tokens=1,
                                  overlong_buffer=0, mask_truncated=masked, seed=4)
        policy, _ = policy_and_reference(str(tiny_model_dir), config, device="cpu")
        steps[masked] = RLTrainer(config.resolve(), policy).rl_step(env, [4, 0], {1: [5, 6]}.__getitem__)
    assert steps[True].response_clip_ratio == steps[False].response_clip_ratio == 1.0
    assert steps[True].loss == 0.0 and steps[True].grad_norm == 0.0
    assert steps[False].grad_norm > 1e-3  # (its loss value is 0: at ratio 1 each group's advantages sum to 0)
    stats = steps[True]
    assert (stats.groups_sampled, stats.groups_kept, stats.groups_dropped, stats.groups_filled,
            stats.sampling_rounds) == (4, 2, 1, 0, 2)  # item 0's group dropped; 5 kept; 6 sampled, surplus
    recorder = RunRecorder(partial(duckdb.connect, str(tmp_path / "r.duckdb")), "run")
    recorder.step(stats)
    with duckdb.connect(str(tmp_path / "r.duckdb")) as conn:
        assert conn.execute("SELECT groups_sampled, groups_kept, groups_dropped, groups_filled, sampling_rounds "
                            "FROM training_steps WHERE run_id = 'run'").fetchall() == [(4, 2, 1, 0, 2)]


def test_token_budget_micro_batches_change_the_cut_not_the_update(tiny_model_dir, env):
    """One RL step with 2 fixed micro-batches of 4 rows, and with micro-batches of at most 260 padded
    tokens (3 rows of ~85 tokens each): other micro-batches, less padding, the same accumulated gradient."""
    from aerorl_ops.rl.runtime.policy import policy_and_reference
    from aerorl_ops.rl.step.trainer import RLTrainer

    torch.set_num_threads(1)
    grads, steps, cuts = {}, {}, {}
    for budget in (0, 260):
        config = TrainingSettings(group_size=2, prompts_per_step=4, max_new_tokens=3, grad_accumulation=2,
                                  kl_coef=0.0, seed=4, learning_rate=1e-2, micro_batch_tokens=budget)
        policy, _ = policy_and_reference(str(tiny_model_dir), config, device="cpu")
        trainer = RLTrainer(config.resolve(), policy)
        cut = []
        score = trainer._score_rollout
        trainer._score_rollout = lambda batches, mask, cut=cut, score=score: (
            cut.extend(b.input_ids.shape[0] for b in batches), score(batches, mask))[1]
        named = dict(policy.loaded.model.named_parameters())
        step = trainer.optimizer.step
        trainer.optimizer.step = lambda step=step, named=named, budget=budget: (grads.__setitem__(
            budget, {n: p.grad.clone() for n, p in named.items() if p.grad is not None}), step())[1]
        steps[budget] = trainer.rl_step(env, [4, 5, 6, 7])
        cuts[budget] = cut
    assert cuts[0] == [4, 4] and cuts[260] == [3, 3, 2]
    assert steps[260].padded_token_fraction <= steps[0].padded_token_fraction
    assert steps[260].loss == pytest.approx(steps[0].loss, abs=1e-6)
    assert grads[0].keys() == grads[260].keys() and grads[0]
    largest = max(float(g.abs().max()) for g in grads[0].values())
    difference = max(float((grads[0][n] - grads[260][n]).abs().max()) for n in grads[0])
    assert largest > 1e-4 and difference < 1e-6 * largest
