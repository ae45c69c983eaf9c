"""Episodes of a task environment as model batches: prompts, sampled or greedy replies, graded.

- prompts go through ``evaluator.replies.encode_observations`` (the model's own processor and chat
  template, left-padded);
- ``generate_replies``: greedy or sampled completions; special tokens other than EOS are never
  emitted (``aerorl_ops.generation.suppression``); a reply is at most ``max_new_tokens`` long;
- ``collect_rollout``: ``group_size`` samples per prompt, each graded by ``env.step``;
  ``sample_parts``: the same over given micro-batches of indices, each optionally seeded. Given a
  ``ReplySampler`` (``generation.vllm_sampler.VLLMSampler``), it samples the replies from the same
  prompt text instead of the policy's ``generate``; either way the batches hold the prompts and
  reply tokens only, so the trainer scores the replies with the policy itself;
- ``supervised_batch``: prompts followed by their reference answer and EOS (the plain answer
  format: the environment's first answer, no JSON), for the masked supervised loss.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import torch
from PIL import Image

from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.envs.types import Completion, Observation
from aerorl_ops.evaluator.replies import encode_observations, generate_new_tokens, observation_prompts
from aerorl_ops.generation.batched import eos_token_ids, trim_after_eos
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rl.sequences import SequenceBatch, append_completions


@dataclass(frozen=True)
class Sampling:
    """How rollouts sample (``top_k`` 0 = off, ``top_p`` 1 = off); ``None`` in place of it means greedy."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0


class Replies(NamedTuple):
    token_ids: list[list[int]]  # [B] generated ids, up to and including the first EOS
    texts: list[str]  # [B] decoded, special tokens removed, stripped
    truncated: list[bool]  # [B] cut at max_new_tokens without an EOS


class ReplySampler(Protocol):
    """What samples rollout replies in place of the policy's ``generate``: ``VLLMSampler`` has it."""

    def sample(self, prompts: Sequence[str], images: Sequence[Sequence[Image.Image]], max_new_tokens: int,
               sampling: Sampling | None, n: int = 1,
               seed: int | None = None) -> tuple[list[list[int]], list[str], list[bool]]: ...


SEEDS_PER_PART = 2**20
"""A ``ReplySampler`` seeds prompt i of a part with (its seed + i): part seeds, which are consecutive
integers, are spread this far apart, so no two prompts of a step share a seed."""


class Graded(NamedTuple):
    rewards: torch.Tensor  # [B] the environment's rewards
    correct: torch.Tensor  # [B] bool, the environment's accuracy test
    components: dict[str, torch.Tensor]  # name -> [B] reward components (0 where a reply lacks one)
    predictions: list[str]  # [B]


class Rollout(NamedTuple):
    indices: list[int]  # [B] environment indices, each prompt repeated group_size times, groups contiguous
    batches: list[SequenceBatch]  # one per micro-batch, rows in order
    replies: Replies
    graded: Graded
    generation_s: float


def observe_all(env: TaskEnv, indices: Sequence[int]) -> list[Observation]:
    return [env.reset(index)[1] for index in indices]


def generate_replies(loaded: LoadedVLM, inputs, max_new_tokens: int, sampling: Sampling | None) -> Replies:
    """One completion per prompt row of ``inputs``: greedy when ``sampling`` is None."""
    decoding = (dict(do_sample=False, temperature=None, top_k=None, top_p=None) if sampling is None else
                dict(do_sample=True, temperature=sampling.temperature, top_k=sampling.top_k, top_p=sampling.top_p))
    new_tokens, eos = generate_new_tokens(loaded, inputs, max_new_tokens, decoding)
    ids = [trim_after_eos(tokens, eos) for tokens in new_tokens]
    texts = [loaded.tokenizer.decode(row, skip_special_tokens=True).strip() for row in ids]
    truncated = [len(row) >= max_new_tokens and not (row and row[-1] in eos) for row in ids]
    return Replies(ids, texts, truncated)


def grade(env: TaskEnv, indices: Sequence[int], replies: Replies, eos: Sequence[int]) -> Graded:
    """``env.step`` on each reply (a fresh episode per reply)."""
    rewards, correct, predictions, infos = [], [], [], []
    for index, ids, text in zip(indices, replies.token_ids, replies.texts, strict=True):
        state, _ = env.reset(index)
        result = env.step(state, Completion(text, tuple(t for t in ids if t not in eos)))
        rewards.append(result.reward)
        correct.append(result.info.correct)
        predictions.append(result.info.prediction)
        infos.append(result.info.components)
    names = sorted({name for components in infos for name in components})
    components = {name: torch.tensor([float(c.get(name, 0.0)) for c in infos]) for name in names}
    return Graded(torch.tensor(rewards, dtype=torch.float32), torch.tensor(correct, dtype=torch.bool), components,
                  predictions)


def micro_batches(items: Sequence, count: int) -> list[list]:
    """``items`` cut into ``count`` contiguous, nearly equal parts (none empty)."""
    count = max(1, min(count, len(items)))
    size, extra = divmod(len(items), count)
    parts, start = [], 0
    for part in range(count):
        end = start + size + (part < extra)
        parts.append(list(items[start:end]))
        start = end
    return parts


def collect_rollout(loaded: LoadedVLM, env: TaskEnv, prompts: Sequence[int], group_size: int, max_new_tokens: int,
                    sampling: Sampling, micro_batch_count: int = 1, sampler: ReplySampler | None = None) -> Rollout:
    """Sample ``group_size`` replies per prompt (in ``micro_batch_count`` generation batches, by
    ``sampler`` when given) and grade them."""
    indices = [index for index in prompts for _ in range(group_size)]
    return sample_parts(loaded, env, micro_batches(indices, micro_batch_count), max_new_tokens, sampling,
                        sampler=sampler)


def sample_parts(loaded: LoadedVLM, env: TaskEnv, parts: Sequence[Sequence[int]], max_new_tokens: int,
                 sampling: Sampling, seeds: Sequence[int] | None = None,
                 sampler: ReplySampler | None = None) -> Rollout:
    """One sampled reply per environment index of each part (one generation batch per part), graded.
    With ``seeds``, torch (or ``sampler``'s requests) is seeded from ``seeds[k]`` right before part k
    is generated, so a part's samples do not depend on which other parts this process generates.
    With ``sampler``, it samples the replies (the policy's prompts still make the batches)."""
    batches, token_ids, texts, truncated = [], [], [], []
    started = time.perf_counter()
    for k, part in enumerate(parts):
        observations = observe_all(env, part)
        inputs = encode_observations(loaded, observations)
        if sampler is not None:
            seed = None if seeds is None else seeds[k] * SEEDS_PER_PART % 2**62
            replies = Replies(*sampler.sample(observation_prompts(loaded, observations),
                                              [o.images for o in observations], max_new_tokens, sampling, seed=seed))
        else:
            if seeds is not None:
                torch.manual_seed(seeds[k])
            replies = generate_replies(loaded, inputs, max_new_tokens, sampling)
        batches.append(append_completions(inputs, replies.token_ids, loaded.tokenizer.pad_token_id,
                                          loaded.model.config))
        token_ids += replies.token_ids
        texts += replies.texts
        truncated += replies.truncated
    elapsed = time.perf_counter() - started
    replies = Replies(token_ids, texts, truncated)
    indices = [index for part in parts for index in part]
    return Rollout(indices, batches, replies, grade(env, indices, replies, eos_token_ids(loaded)), elapsed)


def answer_target(env: TaskEnv, index: int) -> str:
    """What supervised training teaches the model to say: the item's first answer, plain."""
    return env.items[index].answers[0]


def supervised_batch(loaded: LoadedVLM, env: TaskEnv, indices: Sequence[int]) -> SequenceBatch:
    """Prompts followed by their target answers and EOS: a teacher-forced batch."""
    inputs = encode_observations(loaded, observe_all(env, indices))
    eos = eos_token_ids(loaded)[0]
    targets = [loaded.tokenizer.encode(answer_target(env, i), add_special_tokens=False) + [eos] for i in indices]
    return append_completions(inputs, targets, loaded.tokenizer.pad_token_id, loaded.model.config)
