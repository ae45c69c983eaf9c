"""Replies of a VLM to episodes of a task environment, graded: what a greedy held-out evaluation and a
training rollout share.

- ``observe_all``: each item's observation (``env.reset``);
- ``generate_replies``: one greedy or sampled completion per prompt row; special tokens other than EOS
  are never emitted (``aerorl_ops.generation.suppression``); a reply is at most ``max_new_tokens`` long;
- ``grade``: ``env.step`` on each reply, a fresh episode per reply; when ``env`` is a ``JudgedEnv`` its
  judge grades the batch in one call too, and weight x judge score joins each reward;
- ``micro_batches``: items cut into contiguous, nearly equal parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch

from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.envs.judged import JudgedEnv
from aerorl_ops.envs.types import Completion, Observation
from aerorl_ops.eval_runner.replies import generate_new_tokens
from aerorl_ops.generation.batched import trim_after_eos
from aerorl_ops.generation.generator_sampling import PrivateDraws
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rewards.judge import OK
from aerorl_ops.rows.task_item import TaskItem


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


class Graded(NamedTuple):
    rewards: torch.Tensor  # [B] the environment's rewards
    correct: torch.Tensor  # [B] bool, the environment's accuracy test
    components: dict[str, torch.Tensor]  # name -> [B] reward components (0 where a reply lacks one)
    predictions: list[str]  # [B]


def observe_all(env: TaskEnv, items: Sequence[TaskItem]) -> list[Observation]:
    return [env.reset(item)[1] for item in items]


def generate_replies(loaded: LoadedVLM, inputs, max_new_tokens: int, sampling: Sampling | None,
                     draws: PrivateDraws | None = None) -> Replies:
    """One completion per prompt row of ``inputs``: greedy when ``sampling`` is None; sampled from ``draws``'s
    generator when given, else from torch's global RNG (the same tokens for the same seed:
    ``generation.generator_sampling``)."""
    if sampling is None:
        decoding = dict(do_sample=False, temperature=None, top_k=None, top_p=None)
    else:
        decoding = dict(do_sample=True, temperature=sampling.temperature, top_k=sampling.top_k, top_p=sampling.top_p)
    new_tokens, eos = generate_new_tokens(loaded, inputs, max_new_tokens, decoding, draws=draws)
    ids = [trim_after_eos(tokens, eos) for tokens in new_tokens]
    texts = [loaded.tokenizer.decode(row, skip_special_tokens=True).strip() for row in ids]
    truncated = [len(row) >= max_new_tokens and not (row and row[-1] in eos) for row in ids]
    return Replies(ids, texts, truncated)


def grade(env: TaskEnv, items: Sequence[TaskItem], replies: Replies, eos: Sequence[int]) -> Graded:
    """``env.step`` on each reply to ``items`` (a fresh episode per reply); a ``JudgedEnv``'s judge grades them
    all at once, adding ``weight * score`` to each reward and the ``judge`` and ``judge_failed`` (1.0 or 0.0)
    components."""
    rewards, correct, predictions, infos = [], [], [], []
    for item, ids, text in zip(items, replies.token_ids, replies.texts, strict=True):
        state, _ = env.reset(item)
        result = env.step(state, Completion(text, tuple(t for t in ids if t not in eos)))
        rewards.append(result.reward)
        correct.append(result.info.correct)
        predictions.append(result.info.prediction)
        infos.append(result.info.components)
    if isinstance(env, JudgedEnv):
        judged = env.judge(items, replies.texts)
        rewards = [reward + env.weight * score for reward, score in zip(rewards, judged.scores, strict=True)]
        infos = [{**info, "judge": score, "judge_failed": float(status != OK)}
                 for info, score, status in zip(infos, judged.scores, judged.statuses, strict=True)]
    names = sorted({name for components in infos for name in components})
    components = {name: torch.tensor([float(c.get(name, 0.0)) for c in infos]) for name in names}
    return Graded(torch.tensor(rewards, dtype=torch.float32), torch.tensor(correct, dtype=torch.bool), components,
                  predictions)


def micro_batches(items: Sequence, count: int) -> list[list]:
    """``items`` cut into ``count`` contiguous, nearly equal parts (none empty).

    >>> micro_batches([1, 2, 3, 4, 5], 2)
    [[1, 2, 3], [4, 5]]
    """
    count = max(1, min(count, len(items)))
    size, extra = divmod(len(items), count)
    parts, start = [], 0
    for part in range(count):
        end = start + size + (part < extra)
        parts.append(list(items[start:end]))
        start = end
    return parts
