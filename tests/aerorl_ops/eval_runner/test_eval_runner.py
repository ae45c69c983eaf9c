"""``evaluate_model`` and ``compare_outcomes`` on real generation: the tiny model, and a checkpoint of it
that answers "yes" (greedy), so the accuracies are known from the answers alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from aerorl_ops.envs.registry import make_env
from aerorl_ops.eval_metrics.pass_at_k import pass_at_k_per_question
from aerorl_ops.eval_metrics.sampling import SamplingSetting
from aerorl_ops.eval_runner.paired_differences import compare_outcomes
from aerorl_ops.eval_runner.replies import sample_responses
from aerorl_ops.eval_runner.runner import evaluate_model

SETTINGS = (
    SamplingSetting("high_temp_pass2", temperature=1.0, top_p=1.0, n=4, k=2),
    SamplingSetting("medium_temp_pass1", temperature=0.6),
    SamplingSetting("greedy_pass1", greedy=True),
)
QUESTIONS = 12


@pytest.fixture(scope="module")
def env():
    return make_env("easy_vqa", split="test", limit=QUESTIONS, seed=0)


@pytest.fixture(scope="module")
def yes_outcome(yes_vlm, env):
    return evaluate_model(yes_vlm, env, range(QUESTIONS), SETTINGS, max_new_tokens=4, batch_size=8, seed=3)


def answers(env) -> list[str]:
    return [item.answers[0] for item in env.items]


def test_greedy_accuracy_is_the_share_of_yes_answers_overall_and_per_type(yes_outcome, env):
    truth = answers(env)
    greedy = [s for s in yes_outcome.samples if s.setting == "greedy_pass1"]
    assert [s.response for s in greedy] == ["yes"] * QUESTIONS
    assert [s.correct for s in greedy] == [answer == "yes" for answer in truth]
    assert all(s.response_tokens == 1 and not s.truncated for s in greedy)
    overall = yes_outcome.metric("greedy_pass1")
    assert overall.accuracy == pytest.approx(truth.count("yes") / QUESTIONS)
    shape = (overall.questions, overall.responses, overall.mean_length, overall.length_clip_ratio)
    assert shape == (QUESTIONS, QUESTIONS, 1.0, 0.0)
    yes_no = [i for i in range(QUESTIONS) if env.question_type(i) == "yes_no"]
    by_type = yes_outcome.metric("greedy_pass1", "yes_no")
    assert by_type.accuracy == pytest.approx(sum(truth[i] == "yes" for i in yes_no) / len(yes_no))
    assert set(yes_outcome.question_types()) == {env.question_type(i) for i in range(QUESTIONS)}


def test_sampled_setting_draws_n_responses_and_reports_unbiased_pass_at_k(yes_outcome):
    high = [s for s in yes_outcome.samples if s.setting == "high_temp_pass2"]
    assert len(high) == 4 * QUESTIONS
    assert [s.sample_no for s in high[:8]] == [0, 1, 2, 3, 0, 1, 2, 3]
    correct = np.array([s.correct for s in high]).reshape(QUESTIONS, 4).sum(axis=1)  # [Q] c per question
    metric = yes_outcome.metric("high_temp_pass2")
    assert metric.accuracy == pytest.approx(pass_at_k_per_question(4, correct, 2).mean())
    assert metric.pass_at_1 == pytest.approx(correct.sum() / (4 * QUESTIONS))
    assert metric.n_correct == int(correct.sum())
    lengths = [s.response_tokens for s in high]
    assert metric.mean_length == pytest.approx(np.mean(lengths))
    assert metric.length_clip_ratio == pytest.approx(np.mean([s.truncated for s in high]))
    assert all(s.truncated == (s.response_tokens == 4) for s in high)
    assert 0 < metric.pass_at_1 < 1  # temperature 1.0 strays from "yes" now and then


def test_the_same_seed_gives_the_same_responses_and_leaves_the_caller_state_alone(yes_vlm, env, yes_outcome):
    yes_vlm.model.train()
    torch.manual_seed(123)
    before = torch.get_rng_state()
    again = evaluate_model(yes_vlm, env, range(QUESTIONS), SETTINGS, max_new_tokens=4, batch_size=8, seed=3)
    assert torch.equal(torch.get_rng_state(), before)
    assert yes_vlm.model.training
    yes_vlm.model.eval()
    assert again.samples == yes_outcome.samples
    other = evaluate_model(yes_vlm, env, range(QUESTIONS), SETTINGS[:1], max_new_tokens=4, batch_size=8, seed=4)
    assert [s.response for s in other.samples] != [s.response for s in again.samples if s.setting == SETTINGS[0].name]


def test_one_greedy_response_is_yes_then_eos(yes_vlm, env):
    from aerorl_ops.eval_runner.replies import encode_observations

    inputs = encode_observations(yes_vlm, [env.reset(env.items[0])[1]])
    responses = sample_responses(yes_vlm, inputs, SETTINGS[2], max_new_tokens=4, seed=0)
    assert responses.texts == ["yes"] and responses.truncated == [False]


def test_compare_with_the_tiny_model_gives_mcnemar_for_one_response_and_bootstrap_for_several(
        yes_outcome, tiny_vlm, env):
    tiny = evaluate_model(tiny_vlm, env, range(QUESTIONS), SETTINGS, max_new_tokens=4, batch_size=8, seed=3)
    assert tiny.metric("greedy_pass1").accuracy == 0.0  # random weights never produce a one-word answer
    rows = {(row.setting, row.question_type): row for row in compare_outcomes(yes_outcome, tiny, resamples=2000)}
    greedy = rows["greedy_pass1", "all"]
    yes_count = answers(env).count("yes")
    assert (greedy.method, greedy.b, greedy.c, greedy.questions) == ("mcnemar_exact", yes_count, 0, QUESTIONS)
    assert greedy.difference == pytest.approx(yes_count / QUESTIONS)
    assert greedy.p_value == pytest.approx(2 / 2 ** yes_count)
    assert greedy.ci_low > 0 and greedy.ci_high <= yes_count / QUESTIONS
    high = rows["high_temp_pass2", "all"]
    assert (high.method, high.resamples, high.p_value) == ("paired_bootstrap", 2000, None)
    assert high.ci_low <= high.difference <= high.ci_high
    assert high.difference == pytest.approx(yes_outcome.metric("high_temp_pass2").accuracy)
    assert {key[1] for key in rows} == {"all", *yes_outcome.question_types()}


def test_outcomes_on_different_questions_are_refused(yes_outcome, yes_vlm, env):
    fewer = evaluate_model(yes_vlm, env, range(3), SETTINGS[2:], max_new_tokens=2, batch_size=8)
    with pytest.raises(ValueError, match="different questions"):
        compare_outcomes(yes_outcome, fewer)


def test_bad_arguments_name_the_problem(yes_vlm, env):
    with pytest.raises(ValueError, match="no items"):
        evaluate_model(yes_vlm, env, [], SETTINGS, max_new_tokens=4, batch_size=8)
    with pytest.raises(ValueError, match="repeat"):
        evaluate_model(yes_vlm, env, [1, 1], SETTINGS, max_new_tokens=4, batch_size=8)
    with pytest.raises(ValueError, match="distinct names"):
        evaluate_model(yes_vlm, env, [1], SETTINGS[:1] * 2, max_new_tokens=4, batch_size=8)


def test_reflection_words_can_be_replaced(yes_vlm, env):
    outcome = evaluate_model(yes_vlm, env, range(QUESTIONS), SETTINGS[2:], max_new_tokens=4, batch_size=8,
                             reflection_words=("YES",))
    assert all(sample.reflection for sample in outcome.samples)
    metric = outcome.metric("greedy_pass1")
    assert (metric.n_reflection, metric.reflection_ratio) == (QUESTIONS, 1.0)
    assert metric.correct_ratio_in_reflection == pytest.approx(metric.accuracy)
    assert metric.correct_ratio_in_no_reflection is None  # every response reflects: no denominator
    default = evaluate_model(yes_vlm, env, range(QUESTIONS), SETTINGS[2:], max_new_tokens=4, batch_size=8)
    assert default.metric("greedy_pass1").reflection_ratio == 0.0
