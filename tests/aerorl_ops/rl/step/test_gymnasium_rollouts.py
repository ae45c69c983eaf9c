"""Multi-turn rollouts of a Gymnasium environment (``envs.gymnasium_env``, MiniGrid-Empty-5x5-v0) on the
embedded tiny Qwen2-VL, through the trainer's rollout path: an image every turn, each at its own turn's
placeholders, parse failures counted, the loss never counting an environment token; and the planner's
episodes teacher-forced (``rl.step.scripted_episodes``)."""

from __future__ import annotations

import pytest
import torch

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.gymnasium_env import NOT_AN_ACTION
from aerorl_ops.envs.registry import make_env
from aerorl_ops.envs.types import Completion
from aerorl_ops.eval_runner.episodes import Sampling
from aerorl_ops.rl.runtime.policy import policy_and_reference
from aerorl_ops.rl.step.multi_turn import env_turn, sample_episodes
from aerorl_ops.rl.step.rollout import collect_rollout, reply_batches
from aerorl_ops.rl.step.scripted_episodes import scripted_batch
from aerorl_ops.rl.step.sequences import completion_logprobs
from aerorl_ops.rl.step.trainer import RLTrainer

pytest.importorskip("minigrid")

IMAGE_TOKENS = 16  # a 40x40 frame (5 tiles of 8 px) is resized to 112x112: 8x8 patches, merged 2x2
PLAN = ["forward", "forward", "right", "forward", "forward"]


@pytest.fixture(scope="module")
def env():
    torch.set_num_threads(1)
    return make_env("gymnasium", env_id="MiniGrid-Empty-5x5-v0", actions=["left", "right", "forward"], split="train",
                    limit=4, max_turns=3, env_kwargs={"tile_size": 8})


def image_tokens(loaded, batch) -> list[int]:
    return (batch.input_ids == loaded.model.config.image_token_id).sum(dim=1).tolist()


def test_a_reply_that_names_no_action_costs_a_turn_and_the_next_shows_the_frame_again(yes_vlm, env):
    """The yes-model answers "yes" every turn: never an action, so every episode runs its three turns, each
    reply counted as a parse failure, each later turn one image and the not-an-action line."""
    episodes = sample_episodes(yes_vlm, env, env.items, 4, None)
    assert episodes.turns == [3] * 4 and episodes.graded.rewards.tolist() == [0.0] * 4
    assert episodes.graded.components["parse_failures"].tolist() == [3.0] * 4
    assert episodes.graded.components["env_steps"].tolist() == [0.0] * 4
    assert not episodes.graded.correct.any()
    for later in episodes.later:
        assert [len(turn.images) for turn in later] == [1, 1]
        assert all(f"{NOT_AN_ACTION} get to the green goal square. Turn {k + 2} of 3" in turn.text
                   for k, turn in enumerate(later))


def test_a_rollout_shows_an_image_every_turn_and_a_replay_rebuilds_its_batches(tiny_vlm, env):
    torch.manual_seed(0)
    rollout = collect_rollout(tiny_vlm, env, [0, 1], group_size=2, max_new_tokens=3, sampling=Sampling(),
                              micro_batch_count=2)
    turns = [len(rewards) for rewards in rollout.turn_rewards]  # replies written, one reward each
    starts = [sum(pair == (False, True) for pair in zip(actions, actions[1:], strict=False))
              for actions in rollout.actions]  # a reply starts after each environment turn
    assert starts == [t - 1 for t in turns]
    shown = [n for batch in rollout.batches for n in image_tokens(tiny_vlm, batch)]
    assert shown == [IMAGE_TOKENS * t for t in turns]  # one image per turn, at its own placeholders
    assert [int(batch.inputs["image_grid_thw"].shape[0]) for batch in rollout.batches] == [sum(turns[:2]),
                                                                                          sum(turns[2:])]
    items = [prompt.item for prompt in rollout.prompts]
    rebuilt = reply_batches(tiny_vlm, env, [items[:2], items[2:]],
                            [rollout.replies.token_ids[:2], rollout.replies.token_ids[2:]])
    for ours, theirs in zip(rollout.batches, rebuilt, strict=True):
        for name in ("input_ids", "attention_mask", "pixel_values", "image_grid_thw"):
            assert torch.equal(ours.inputs[name], theirs.inputs[name]), name


def test_an_rl_step_on_the_grid_never_counts_an_environment_token(tiny_model_dir, env, monkeypatch):
    from aerorl_ops.rl.step.loss import RLLoss

    config = TrainingSettings(group_size=2, prompts_per_step=2, max_new_tokens=3, kl_coef=0.0, seed=3,
                              learning_rate=1e-2)
    policy, _ = policy_and_reference(str(tiny_model_dir), config, device="cpu")
    trainer = RLTrainer(config.resolve(), policy)
    seen, call = [], RLLoss.__call__
    monkeypatch.setattr(RLLoss, "__call__", lambda self, logprob, entropy, values, part, shares: (
        seen.append(part), call(self, logprob, entropy, values, part, shares))[1])
    stats = trainer.rl_step(env, [0, 1])
    assert stats.reward_mean == 0.0 and stats.accuracy == 0.0 and stats.response_length > 3
    state, _ = env.reset(env.items[0])
    later = len(env_turn(policy.loaded, env.step(state, Completion("?")).observation).ids)
    for part in seen:
        for row in part.mask.tolist():  # the counted tokens: replies only, each environment turn a gap
            counted = [k for k, value in enumerate(row) if value == 1.0]
            gaps = [b - a - 1 for a, b in zip(counted, counted[1:], strict=False) if b - a > 1]
            assert all(gap in (later, later + 1) for gap in gaps)  # (+1: the end of turn of a reply cut short)


def test_the_planners_episode_teacher_forced_counts_the_replies_only_and_trains(fresh_tiny_vlm):
    loaded = fresh_tiny_vlm
    env = make_env("gymnasium", env_id="MiniGrid-Empty-5x5-v0", actions=["left", "right", "forward"], limit=2,
                   max_turns=8, env_kwargs={"tile_size": 8})
    plans = [list(env.planned_actions(item)) for item in env.items]
    assert plans == [PLAN, PLAN]  # the empty grid's start is fixed
    batch = scripted_batch(loaded, env, env.items, plans)
    assert image_tokens(loaded, batch) == [IMAGE_TOKENS * len(PLAN)] * 2
    counted = batch.input_ids[0][batch.completion_mask[0]].tolist()
    assert loaded.tokenizer.decode(counted) == "<|im_end|>".join(PLAN) + "<|im_end|>"
    with pytest.raises(ValueError, match="the episode ended at turn 5 of the 6 replies given"):
        scripted_batch(loaded, env, env.items[:1], [PLAN + ["left"]])
    optimizer = torch.optim.AdamW(loaded.model.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        loss = -completion_logprobs(loaded.model, batch).logprobs.mean()  # [] the replies' token-mean NLL
        losses.append(float(loss.detach()))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert losses[0] > 3.0 and losses[2] < losses[1] < losses[0]  # untrained (vocabulary of 1024), then learning


class PlannedSampler:
    """A reply sampler (the vLLM engine's interface) that answers every request with the planner's next word,
    and keeps the requests it was sent."""

    def __init__(self, loaded, words):
        self.loaded, self.words, self.requests = loaded, list(words), []

    def sample(self, prompts, images, max_new_tokens, sampling, n=1, seed=None, videos=()):
        self.requests.append((list(prompts), [len(row) for row in images], seed))
        word = self.words[len(self.requests) - 1]
        ids = self.loaded.tokenizer.encode(word, add_special_tokens=False) + [self.loaded.tokenizer.eos_token_id]
        return [ids] * len(prompts), [word] * len(prompts), [False] * len(prompts)


def test_a_sampler_is_sent_each_turn_as_the_chat_template_writes_the_conversation_with_every_frame(tiny_vlm):
    """What a vLLM engine samples each turn from: the conversation so far as the chat template writes it, and
    every frame shown so far; the episode is the sampler's replies, scored as the policy's own tokens."""
    env = make_env("gymnasium", env_id="MiniGrid-Empty-5x5-v0", actions=["left", "right", "forward"], limit=1,
                   max_turns=8, env_kwargs={"tile_size": 8})
    sampler = PlannedSampler(tiny_vlm, PLAN)
    episodes = sample_episodes(tiny_vlm, env, env.items, 8, Sampling(), sampler, seed=100)
    assert episodes.graded.correct.tolist() == [True] and episodes.turns == [5]
    assert [(images, seed) for _, images, seed in sampler.requests] == [([t + 1], 100 + t) for t in range(5)]
    state, observation = env.reset(env.items[0])
    conversation = list(observation.messages)
    for word, (prompts, _, _) in zip(PLAN, sampler.requests, strict=True):
        assert prompts == [tiny_vlm.processor.apply_chat_template(conversation, add_generation_prompt=True,
                                                                  tokenize=False)]
        result = env.step(state, Completion(word))
        state = result.state
        if not result.done:
            conversation += [{"role": "assistant", "content": [{"type": "text", "text": word}]},
                             *result.observation.messages]
    own = [t for t, mine in zip(episodes.replies.token_ids[0], episodes.actions[0], strict=True) if mine]
    assert tiny_vlm.tokenizer.decode(own) == "<|im_end|>".join(PLAN) + "<|im_end|>"
