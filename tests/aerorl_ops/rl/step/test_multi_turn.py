"""Multi-turn episodes (``rl.step.multi_turn``) on easy-VQA with a second try (``envs.two_tries``): the
environment's tokens, the action mask's gaps, per-turn rewards, an RL step whose loss never counts an
environment token, the two-try accuracy, a resumed run, and a later turn's image at its own turn."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.registry import make_env
from aerorl_ops.envs.two_tries import FEEDBACK, TwoTriesEnv, easy_vqa_two_tries_env
from aerorl_ops.envs.types import Observation, observe
from aerorl_ops.rl.run.phases import run_training
from aerorl_ops.rl.runtime.policy import policy_and_reference
from aerorl_ops.rl.step.multi_turn import env_turn, sample_episodes, two_try_report
from aerorl_ops.rl.step.rollout import observe_all, reply_batches
from aerorl_ops.rl.step.sequences import append_completions, completion_logprobs
from aerorl_ops.rl.step.trainer import RLTrainer


@pytest.fixture(scope="module")
def env():
    torch.set_num_threads(1)
    return make_env("easy_vqa_two_tries", split="train", limit=16, seed=1)


def test_the_environment_turn_is_the_chat_templates_user_turn_and_assistant_header(tiny_vlm, env):
    wrong = env.step(env.reset(env.items[0])[0], _completion("?"))
    ids = list(env_turn(tiny_vlm, wrong.observation).ids)
    assert tiny_vlm.tokenizer.decode(ids) == f"\n<|im_start|>user\n{FEEDBACK}<|im_end|>\n<|im_start|>assistant\n"


def test_a_wrong_first_answer_gets_a_second_turn_whose_environment_tokens_are_gaps(yes_vlm, env):
    """The yes-model answers "yes" every time: right on yes-questions (one turn, reward 1), wrong on the
    others (two turns, 0 then 0.5 x right)."""
    episodes = sample_episodes(yes_vlm, env, env.items[:16], 4, None)
    feedback = list(env_turn(yes_vlm, env.step(env.reset(env.items[0])[0], _completion("?")).observation).ids)
    answers = [env.items[k].answers[0] for k in range(16)]
    assert set(answers) > {"yes"}  # both kinds of question are here
    for k, answer in enumerate(answers):
        completion, action = episodes.replies.token_ids[k], episodes.actions[k]
        reply = completion[:action.index(False)] if False in action else completion
        assert yes_vlm.tokenizer.decode(reply, skip_special_tokens=True).strip() == "yes"
        if answer == "yes":
            assert episodes.turns[k] == 1 and all(action)
            assert episodes.turn_rewards[k] == [(len(reply) - 1, 1.0)]
            assert episodes.graded.components["first_try_correct"][k] == 1.0
        else:
            assert episodes.turns[k] == 2
            gap = completion[len(reply):len(reply) + len(feedback)]
            assert gap == feedback and action == [True] * len(reply) + [False] * len(feedback) + [True] * len(reply)
            assert episodes.turn_rewards[k] == [(len(reply) - 1, 0.0), (len(completion) - 1, 0.0)]
            assert not episodes.graded.correct[k] and episodes.graded.rewards[k] == 0.0


def test_an_rl_step_never_counts_an_environment_token(tiny_model_dir, env, monkeypatch):
    from aerorl_ops.rl.step.loss import RLLoss

    config = TrainingSettings(group_size=2, prompts_per_step=4, max_new_tokens=3, kl_coef=0.0, seed=3,
                              learning_rate=1e-2, grad_accumulation=2)
    policy, _ = policy_and_reference(str(tiny_model_dir), config, device="cpu")
    trainer = RLTrainer(config.resolve(), policy)
    seen, call = [], RLLoss.__call__
    monkeypatch.setattr(RLLoss, "__call__", lambda self, logprob, entropy, values, part, shares: (
        seen.append(part), call(self, logprob, entropy, values, part, shares))[1])
    stats = trainer.rl_step(env, [0, 1, 2, 3])
    masks = torch.cat([part.mask for part in seen])  # [B, L] the loss's counted tokens, rows in order
    assert stats.response_length > 3  # some episode took a second turn: its completion holds the feedback
    feedback = len(env_turn(policy.loaded, env.step(env.reset(env.items[0])[0], _completion("?")).observation).ids)
    interior = []  # per row, the uncounted tokens between its first and last counted one
    for row in masks.tolist():
        counted = [k for k, value in enumerate(row) if value == 1.0]
        interior.append(sum(1 for k in range(counted[0], counted[-1]) if row[k] == 0.0) if counted else 0)
    # a second turn's row leaves out exactly the environment's tokens (and the end of turn of a reply cut short)
    assert any(interior) and all(gap in (0, feedback, feedback + 1) for gap in interior)


def test_two_tries_are_right_at_least_as_often_as_one_and_revisions_add_up(tiny_model_dir, env):
    policy, _ = policy_and_reference(str(tiny_model_dir), TrainingSettings(), device="cpu")
    report = two_try_report(policy.loaded, env, list(range(16)), 4, None)
    assert report.n == 16
    assert report.within_two_tries >= report.first_try
    revised = report.revised * (report.n - round(report.first_try * report.n))
    assert round(report.within_two_tries * report.n) == round(report.first_try * report.n) + round(revised)


def test_a_resumed_multi_turn_run_reproduces_its_steps(tiny_model_dir, env, tmp_path):
    settings = TrainingSettings(env="easy_vqa_two_tries", group_size=2, prompts_per_step=2, max_new_tokens=3,
                                kl_coef=0.0, seed=4, warmup_steps=1, warmup_batch_size=4, steps=3,
                                checkpoint_interval=2, eval_interval=100, control=False, swap_check_type="",
                                sampled_eval_size=0)

    def losses(run_dir, steps):
        result = run_training(str(tiny_model_dir), run_dir, dataclasses.replace(settings, steps=steps),
                              env, env, [0, 1], device="cpu", resume=True)
        return {s.step: (s.loss, s.reward_mean, s.response_length) for s in result.steps}

    whole = losses(tmp_path / "whole", 3)
    losses(tmp_path / "resumed", 1)  # stops after its step-2 checkpoint (warm-up 1 + RL 1)
    resumed = losses(tmp_path / "resumed", 3)
    assert min(resumed) == 3 and {step: whole[step] for step in resumed} == resumed


class NextImageTwoTries(TwoTriesEnv):
    """A second try that shows the next item's image (not the question's), so a swapped image shows."""

    def _feedback(self, item):
        image = observe(self.items[(self.items.index(item) + 1) % len(self)]).images[0]
        return Observation(images=(image,), messages=[{"role": "user", "content": [
            {"type": "image"}, {"type": "text", "text": self.feedback}]}])


def test_a_later_turns_image_sits_at_its_own_turn_as_the_processor_places_it(yes_vlm, tiny_vlm, env):
    """A second try that shows another image: the batch rebuilt from the completion ids (the episode replayed)
    is the processor's own encoding of the whole conversation, both images in turn order, and the second
    reply's log-probs are a model's on that conversation; they depend on the second image, the first
    reply's do not (scored by the untrained tiny model, which the yes-model's yes does not ignore)."""
    two_tries = NextImageTwoTries(env.env)
    episodes = sample_episodes(yes_vlm, two_tries, two_tries.items[:16], 4, None)
    row = episodes.turns.index(2)  # a question the yes-model got wrong
    completion, action = episodes.replies.token_ids[row], episodes.actions[row]
    first = completion[:action.index(False)]
    second = completion[len(action) - action[::-1].index(False):]
    batch = reply_batches(yes_vlm, two_tries, [[two_tries.items[row]]], [[completion]])[0]

    question = observe_all(two_tries, [two_tries.items[row]])[0]
    shown = observe(env.items[(row + 1) % 16]).images[0]
    conversation = [*question.messages,
                    {"role": "assistant", "content": [{"type": "text", "text": "yes"}]},
                    {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": FEEDBACK}]}]
    text = yes_vlm.processor.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)
    whole = yes_vlm.processor(text=[text], images=[[question.images[0], shown]], return_tensors="pt")
    expected = append_completions(whole, [second], yes_vlm)
    for name in ("input_ids", "attention_mask", "mm_token_type_ids", "pixel_values", "image_grid_thw"):
        assert torch.equal(batch.inputs[name], expected.inputs[name]), name
    assert yes_vlm.tokenizer.decode(first, skip_special_tokens=True).strip() == "yes"
    assert int((batch.input_ids == yes_vlm.model.config.image_token_id).sum()) == 2 * 16  # two 16-patch images

    with torch.no_grad():
        ours = completion_logprobs(tiny_vlm.model, batch).logprobs  # [len(completion)] every completion token
        theirs = completion_logprobs(tiny_vlm.model, expected).logprobs  # [len(second)]
        other = observe(env.items[(row + 2) % 16]).images[0]
        swapped = dict(batch.inputs, **{k: v for k, v in yes_vlm.processor(
            text=[text], images=[[question.images[0], other]], return_tensors="pt").items()
            if k in ("pixel_values", "image_grid_thw")})
        moved = completion_logprobs(tiny_vlm.model, batch._replace(inputs=swapped)).logprobs
    assert torch.allclose(ours[-len(second):], theirs, atol=1e-5, rtol=0)
    assert torch.equal(moved[:len(first)], ours[:len(first)])  # the first reply never sees the second image
    assert not torch.allclose(moved[-len(second):], ours[-len(second):], atol=1e-4, rtol=0)


def test_the_second_try_can_show_the_image_again_and_an_rl_step_trains_on_it(tiny_model_dir):
    again = easy_vqa_two_tries_env("train", limit=16, seed=1, show_images_again=True)
    wrong = again.step(again.reset(again.items[0])[0], _completion("?"))
    assert wrong.observation.images and wrong.observation.images[0].tobytes() == \
        observe(again.items[0]).images[0].tobytes()
    config = TrainingSettings(group_size=2, prompts_per_step=2, max_new_tokens=3, kl_coef=0.0, seed=3,
                              micro_batch_tokens=400)  # the token budget rebuilds batches by replaying episodes
    policy, _ = policy_and_reference(str(tiny_model_dir), config, device="cpu")
    shown = env_turn(policy.loaded, wrong.observation)
    assert len(shown.images) == 1 and policy.loaded.model.config.image_token_id in shown.ids
    stats = RLTrainer(config.resolve(), policy).rl_step(again, [0, 1])
    assert stats.response_length > 3 + len(shown.ids) - 1  # a second try, its image tokens in the completion
    assert torch.isfinite(torch.tensor(stats.loss))


def test_an_environment_turn_with_more_images_than_placeholders_is_one_clear_error(tiny_vlm, env):
    image = observe(env.items[0]).images[0]
    with pytest.raises(ValueError, match=r"shows 0 image placeholder\(s\) for 1 image\(s\)"):
        env_turn(tiny_vlm, Observation(images=(image,), messages=[{"role": "user", "content": [
            {"type": "text", "text": "look"}]}]))


def _completion(text):
    from aerorl_ops.envs.types import Completion

    return Completion(text)
