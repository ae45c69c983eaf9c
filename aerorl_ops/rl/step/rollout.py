"""Episodes of a task environment as model batches: prompts, sampled or greedy replies, graded.

- prompts go through ``eval_runner.replies.encode_observations`` (the model's own processor and chat
  template, left-padded);
- ``generate_replies``: greedy or sampled completions; special tokens other than EOS are never
  emitted (``aerorl_ops.generation.suppression``); a reply is at most ``max_new_tokens`` long;
- ``collect_rollout``: ``group_size`` samples per prompt, each graded by ``env.step``;
  ``sample_parts``: the same over given micro-batches of prompts (``rl.step.prompts``: each row carries
  its task item), each optionally seeded. Given a
  ``ReplySampler`` (``generation.vllm_sampler.VLLMSampler``), it samples the replies from the same
  prompt text instead of the policy's ``generate``, one request per prompt with ``n`` = its replies in
  the part (``prompt_runs``: the engine encodes each image once, not ``group_size`` times); either
  way the batches hold the prompts and reply tokens only, so the trainer scores the replies with the
  policy itself;
- ``supervised_batch``: prompts followed by their reference answer and the token that ends an
  assistant turn as the model's chat template writes it (``models.end_of_turn``: Gemma 3's
  ``<end_of_turn>``, Qwen's ``<|im_end|>``; the plain answer format: the item's first answer,
  no JSON), for the masked supervised loss; on a multi-turn environment that demonstrates its
  episodes (a planner's path), the whole demonstrated episode, every turn's reply counted.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import NamedTuple

import torch

from aerorl_ops.envs.base import TaskEnv, demonstration, max_turns
from aerorl_ops.eval_runner.episodes import (
    Graded,
    Replies,
    Sampling,
    generate_replies,
    grade,
    micro_batches,
    observe_all,
)
from aerorl_ops.eval_runner.replies import encode_observations, observation_prompts
from aerorl_ops.generation.batched import eos_token_ids
from aerorl_ops.generation.generator_sampling import PrivateRng
from aerorl_ops.generation.shown_video import shown_videos
from aerorl_ops.generation.vllm_engine import EngineVideo
from aerorl_ops.models.end_of_turn import end_of_turn_id
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rl.step.multi_turn import encode_episodes, replayed_turns, sample_episodes
from aerorl_ops.rl.step.prompts import Prompt, drawn_prompts, prompt_items
from aerorl_ops.rl.step.reply_sampler import ReplySampler
from aerorl_ops.rl.step.scripted_episodes import scripted_batch
from aerorl_ops.rl.step.sequences import SequenceBatch, append_completions
from aerorl_ops.rows.task_item import TaskItem


def prompt_runs(groups: Sequence[int]) -> tuple[list[int], list[int]]:
    """The first row of each run of equal consecutive ``groups`` (a prompt's group, or the part of it a
    micro-batch holds), and the run's length: a ``ReplySampler`` asks for each prompt once, with
    ``n`` replies, so the engine encodes its image once, not once per reply.

    >>> prompt_runs([7, 7, 7, 3, 3, 7])
    ([0, 3, 5], [3, 2, 1])
    """
    firsts, counts = [], []
    for row, group in enumerate(groups):
        if counts and group == groups[row - 1]:
            counts[-1] += 1
        else:
            firsts.append(row)
            counts.append(1)
    return firsts, counts


SEEDS_PER_PART = 2**20
"""A ``ReplySampler`` seeds prompt i of a part with (its seed + i): part seeds, which are consecutive
integers, are spread this far apart, so no two prompts of a step share a seed."""


class Rollout(NamedTuple):
    prompts: list[Prompt]  # [B] each prompt repeated group_size times, groups contiguous
    batches: list[SequenceBatch]  # one per micro-batch, rows in order
    replies: Replies  # multi-turn: the completion ids hold every reply and the environment's tokens
    graded: Graded
    generation_s: float
    actions: list[list[bool]] | None = None  # multi-turn: [B] per completion token, the model's own (step.multi_turn)
    turn_rewards: list[list[tuple[int, float]]] | None = None  # multi-turn: [B] (completion position, reward)


def collect_rollout(loaded: LoadedVLM, env: TaskEnv, prompts: Sequence[int], group_size: int, max_new_tokens: int,
                    sampling: Sampling, micro_batch_count: int = 1, sampler: ReplySampler | None = None) -> Rollout:
    """Sample ``group_size`` replies per prompt (environment indices; in ``micro_batch_count`` generation
    batches, by ``sampler`` when given) and grade them."""
    rows = [prompt for prompt in drawn_prompts(env, prompts) for _ in range(group_size)]
    return sample_parts(loaded, env, micro_batches(rows, micro_batch_count), max_new_tokens, sampling,
                        sampler=sampler)


def sample_parts(loaded: LoadedVLM, env: TaskEnv, parts: Sequence[Sequence[Prompt]], max_new_tokens: int,
                 sampling: Sampling, seeds: Sequence[int] | None = None,
                 sampler: ReplySampler | None = None, rng: PrivateRng | None = None) -> Rollout:
    """One sampled reply per prompt of each part (one generation batch per part), graded.
    With ``seeds``, torch (or ``sampler``'s requests) is seeded from ``seeds[k]`` right before part k
    is generated, so a part's samples do not depend on which other parts this process generates;
    with ``rng`` too, part k draws from ``rng``'s generator seeded so, the same tokens, and torch's global
    RNG is left alone (a worker thread's sampling: ``generation.generator_sampling``).
    With ``sampler``, it samples the replies (the policy's prompts still make the batches)."""
    if max_turns(env) > 1:
        if rng is not None:
            raise ValueError(f"environment {env.name!r} is multi-turn: its episodes sample from torch's global RNG, "
                             "not a private generator")
        return _multi_turn_parts(loaded, env, parts, max_new_tokens, sampling, seeds, sampler)
    batches, token_ids, texts, truncated = [], [], [], []
    started = time.perf_counter()
    for k, part in enumerate(parts):
        observations = observe_all(env, prompt_items(part))
        inputs = encode_observations(loaded, observations)
        if sampler is not None:
            seed = None if seeds is None else seeds[k] * SEEDS_PER_PART % 2**62
            firsts, counts = prompt_runs([p.group for p in part])  # one request per prompt, n = its replies here
            asked = shown_videos(loaded, [observations[row] for row in firsts])
            replies = Replies(*sampler.sample(observation_prompts(loaded, asked), [o.images for o in asked],
                                              max_new_tokens, sampling, n=counts, seed=seed,
                                              videos=[EngineVideo(o.video, o.video_fps) for o in asked]))
        else:
            draws = None if seeds is None or rng is None else rng.part(seeds[k])
            if seeds is not None and rng is None:
                torch.manual_seed(seeds[k])
            replies = generate_replies(loaded, inputs, max_new_tokens, sampling, draws)
        batches.append(append_completions(inputs, replies.token_ids, loaded))
        token_ids += replies.token_ids
        texts += replies.texts
        truncated += replies.truncated
    elapsed = time.perf_counter() - started
    replies = Replies(token_ids, texts, truncated)
    prompts = [prompt for part in parts for prompt in part]
    return Rollout(prompts, batches, replies, grade(env, prompt_items(prompts), replies, eos_token_ids(loaded)),
                   elapsed)


def _multi_turn_parts(loaded: LoadedVLM, env: TaskEnv, parts: Sequence[Sequence[Prompt]], max_new_tokens: int,
                      sampling: Sampling, seeds: Sequence[int] | None, sampler: ReplySampler | None) -> Rollout:
    """``sample_parts`` for a multi-turn environment: one episode per prompt (``rl.step.multi_turn``), each
    turn's replies from ``sampler`` when given (its requests seeded as a single-turn part's)."""
    started = time.perf_counter()
    batches, episodes = [], []
    for k, part in enumerate(parts):
        seed = None if seeds is None else seeds[k] * SEEDS_PER_PART % 2**62
        if seeds is not None and sampler is None:
            torch.manual_seed(seeds[k])
        items = prompt_items(part)
        episodes.append(sample_episodes(loaded, env, items, max_new_tokens, sampling, sampler, seed))
        batches.append(append_completions(encode_episodes(loaded, observe_all(env, items), episodes[-1].later),
                                          episodes[-1].replies.token_ids, loaded))
    replies = Replies(*(sum((getattr(e.replies, name) for e in episodes), []) for name in Replies._fields))
    graded = Graded(torch.cat([e.graded.rewards for e in episodes]), torch.cat([e.graded.correct for e in episodes]),
                    {name: torch.cat([e.graded.components.get(name, torch.zeros(len(e.turns))) for e in episodes])
                     for name in sorted({n for e in episodes for n in e.graded.components})},
                    sum((e.graded.predictions for e in episodes), []))
    return Rollout([prompt for part in parts for prompt in part], batches, replies, graded,
                   time.perf_counter() - started, sum((e.actions for e in episodes), []),
                   sum((e.turn_rewards for e in episodes), []))


def reply_batches(loaded: LoadedVLM, env: TaskEnv, parts: Sequence[Sequence[TaskItem]],
                  replies: Sequence[Sequence[Sequence[int]]]) -> list[SequenceBatch]:
    """The batches ``sample_parts`` builds, from replies sampled before: per part, its items' prompts
    followed by ``replies[k]`` (one token-id list per item, up to and including EOS). A multi-turn
    environment's episodes are replayed for the images of their later turns (``replayed_turns``)."""
    def prompts(part, ids):
        if max_turns(env) == 1:
            return encode_observations(loaded, observe_all(env, part))
        return encode_episodes(loaded, observe_all(env, part),
                               [replayed_turns(loaded, env, item, row) for item, row in zip(part, ids, strict=True)])

    return [append_completions(prompts(part, ids), ids, loaded)
            for part, ids in zip(parts, replies, strict=True)]


def answer_target(item: TaskItem) -> str:
    """What supervised training teaches the model to say: the item's first answer, plain."""
    return item.answers[0]


def supervised_batch(loaded: LoadedVLM, env: TaskEnv, items: Sequence[TaskItem]) -> SequenceBatch:
    """Prompts followed by their target answers and the token that ends a turn: a teacher-forced batch. On a
    multi-turn environment that demonstrates its episodes (``envs.base.demonstration``: a planner's path), each
    item's whole demonstrated episode instead, every reply counted and the environment's turns not
    (``scripted_episodes.scripted_batch``)."""
    shown = [demonstration(env, item) for item in items]
    if any(replies is not None for replies in shown):
        missing = next((item for item, replies in zip(items, shown, strict=True) if replies is None), None)
        if missing is not None:
            raise ValueError(f"environment {env.name!r} demonstrates its episodes, but not item "
                             f"{missing.item_id!r}'s (no path to the goal?): leave it out of supervised training")
        return scripted_batch(loaded, env, items, shown)
    inputs = encode_observations(loaded, observe_all(env, items))
    end = end_of_turn_id(loaded.processor, loaded.source.label)
    targets = [loaded.tokenizer.encode(answer_target(item), add_special_tokens=False) + [end] for item in items]
    return append_completions(inputs, targets, loaded)
