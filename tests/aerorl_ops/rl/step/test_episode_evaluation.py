"""Whole episodes in held-out evaluation, supervision and RL shaping on multi-turn environments (issue 41):
``rl.step.episode_evaluation`` (success, return, turns), ``evaluate_model``'s episodes, a planner's whole
episodes as the supervised target, and DAPO's overlong penalty per reply."""

from __future__ import annotations

import pytest
import torch

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.registry import make_env
from aerorl_ops.envs.wrapped import WrappedEnv
from aerorl_ops.eval_metrics.sampling import SamplingSetting
from aerorl_ops.eval_runner.held_out import evaluate_policy
from aerorl_ops.eval_runner.runner import evaluate_model
from aerorl_ops.rl.step.episode_evaluation import evaluate_episodes, held_out_evaluation
from aerorl_ops.rl.step.multi_turn import sample_episodes
from aerorl_ops.rl.step.rollout import supervised_batch
from aerorl_ops.rl.step.rollout_rounds import turn_overlong_penalties
from aerorl_ops.rl.step.scripted_episodes import scripted_batch

ACTIONS = ["left", "right", "forward"]


@pytest.fixture(scope="module")
def two_tries():
    torch.set_num_threads(1)
    return make_env("easy_vqa_two_tries", split="train", limit=16, seed=1)


def test_the_yes_model_succeeds_on_yes_questions_in_one_turn_and_fails_the_others_in_two(yes_vlm, two_tries):
    """The yes-model answers "yes" every turn: a yes-question is one turn, reward 1, success; any other two
    turns, reward 0, failure. So success, return and turns follow from the answers alone."""
    result = evaluate_episodes(yes_vlm, two_tries, range(16), 4, 7, "final", 3.5, "bigger")
    yes = [item.answers[0] == "yes" for item in two_tries.items]
    p = sum(yes) / 16
    assert 0 < sum(yes) < 16
    assert (result.step, result.phase, result.wall_s, result.distribution) == (7, "final", 3.5, "bigger")
    assert result.accuracy == pytest.approx(p) and result.n == 16
    report = result.episodes
    assert report.n == 16 and report.success == pytest.approx(p)
    assert report.mean_return == pytest.approx(p) and result.reward_mean == pytest.approx(p)
    assert report.mean_turns == pytest.approx(1 * p + 2 * (1 - p))
    assert report.turns_stderr == pytest.approx(report.return_stderr)  # turns = 2 - return, the same spread
    assert result.component_means["first_try_correct"] == pytest.approx(p)
    assert result.report.by_type["yes_no"].n == sum(item.question_type == "yes_no" for item in two_tries.items)


def test_a_single_turn_environment_is_scored_as_before_and_labelled(tiny_vlm):
    env = make_env("easy_vqa", split="test", limit=8, seed=0)
    ours = held_out_evaluation(tiny_vlm, env, range(8), 4, 3, "rl", 0.0, "shapes")
    before = evaluate_policy(tiny_vlm, env, range(8), 4, 3, "rl", 0.0)
    assert ours.distribution == "shapes" and ours.episodes is None and ours.report == before.report
    assert ours.reward_mean == before.reward_mean


def test_a_grid_episode_that_names_no_action_runs_every_turn(yes_vlm):
    pytest.importorskip("minigrid")
    env = make_env("gymnasium", env_id="MiniGrid-Empty-Random-5x5-v0", actions=ACTIONS, split="test", limit=3,
                   max_turns=4, env_kwargs={"tile_size": 8})
    result = held_out_evaluation(yes_vlm, env, range(3), 4, 0, "base")
    assert result.episodes.success == 0.0 and result.episodes.mean_turns == 4.0 and result.episodes.turns_stderr == 0
    assert result.component_means["parse_failures"] == 4.0 and result.component_means["env_steps"] == 0.0


def test_evaluate_model_plays_whole_episodes_of_a_multi_turn_environment(yes_vlm, two_tries):
    greedy = SamplingSetting("greedy_pass1", greedy=True)
    outcome = evaluate_model(yes_vlm, two_tries, range(16), [greedy], max_new_tokens=4, batch_size=8,
                             play=sample_episodes)
    yes = [item.answers[0] == "yes" for item in two_tries.items]
    assert [s.turns for s in outcome.samples] == [1 if y else 2 for y in yes]
    assert [s.correct for s in outcome.samples] == yes
    assert [s.reward for s in outcome.samples] == [float(y) for y in yes]
    assert all(s.response == "yes" for s in outcome.samples)
    overall = outcome.metric("greedy_pass1")
    assert overall.accuracy == pytest.approx(sum(yes) / 16)
    assert overall.mean_turns == pytest.approx(sum(1 if y else 2 for y in yes) / 16)
    with pytest.raises(ValueError, match="is multi-turn .up to 2 turns.: evaluating it plays whole episodes"):
        evaluate_model(yes_vlm, two_tries, range(2), [greedy], max_new_tokens=4, batch_size=8)


def test_a_single_turn_evaluation_has_no_turns(tiny_vlm):
    env = make_env("easy_vqa", split="test", limit=4, seed=0)
    outcome = evaluate_model(tiny_vlm, env, range(4), [SamplingSetting("greedy_pass1", greedy=True)],
                             max_new_tokens=2, batch_size=4)
    assert {s.turns for s in outcome.samples} == {None} and outcome.metric("greedy_pass1").mean_turns is None


class NoPlanFor(WrappedEnv):
    """A grid that knows no path for one of its items."""

    def __init__(self, env, item_id):
        super().__init__(env)
        self.item_id = item_id

    def planned_actions(self, item):
        return None if item.item_id == self.item_id else self.env.planned_actions(item)


def test_supervision_on_a_grid_teaches_the_planners_whole_episode(tiny_vlm):
    pytest.importorskip("minigrid")
    env = make_env("gymnasium", env_id="MiniGrid-Empty-Random-5x5-v0", actions=ACTIONS, split="train", limit=3,
                   seed=4, max_turns=10, env_kwargs={"tile_size": 8})
    plans = [list(env.planned_actions(item)) for item in env.items]
    ours, scripted = supervised_batch(tiny_vlm, env, env.items), scripted_batch(tiny_vlm, env, env.items, plans)
    assert torch.equal(ours.input_ids, scripted.input_ids) and torch.equal(ours.completion_mask,
                                                                        scripted.completion_mask)
    counted = ours.input_ids[0][ours.completion_mask[0]].tolist()
    assert tiny_vlm.tokenizer.decode(counted) == "<|im_end|>".join(plans[0]) + "<|im_end|>"
    with pytest.raises(ValueError, match=f"but not item '{env.items[1].item_id}''s .no path to the goal"):
        supervised_batch(tiny_vlm, NoPlanFor(env, env.items[1].item_id), env.items)


def test_a_two_try_environment_still_teaches_its_first_answer(tiny_vlm, two_tries):
    batch = supervised_batch(tiny_vlm, two_tries, two_tries.items[:2])
    counted = batch.input_ids[0][batch.completion_mask[0]].tolist()
    assert tiny_vlm.tokenizer.decode(counted) == two_tries.items[0].answers[0] + "<|im_end|>"


def test_the_overlong_penalty_of_a_multi_turn_rollout_is_each_replys_own():
    """Two replies of 4 and 2 tokens around 5 environment tokens, max_new_tokens 4 and a buffer of 2: the first
    (4 > 2) loses (4 - 2) / 2 = 1 at its last token, the second (2) nothing; the environment's tokens count for
    nothing, where one episode-long length (11) would have cost 4.5."""
    recipe = TrainingSettings(algorithm="dapo", max_new_tokens=4, overlong_buffer=2).resolve()
    own = [True] * 4 + [False] * 5 + [True] * 2
    actions = torch.tensor([own, [True] * 3 + [False] * 8])
    penalties = turn_overlong_penalties(actions, recipe)  # [2, 11]
    assert penalties[0].tolist() == [0, 0, 0, -1.0, 0, 0, 0, 0, 0, 0, 0]
    assert penalties[1].tolist() == [0, 0, -0.5, 0, 0, 0, 0, 0, 0, 0, 0]
    off = TrainingSettings(algorithm="dapo", max_new_tokens=4, overlong_buffer=0).resolve()
    assert not turn_overlong_penalties(actions, off).any()
