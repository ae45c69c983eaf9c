"""A sampled share of an RL step's rollout, as rows a person can read: what the policy said to which
question (and image), and what it earned.

Each reply of a step is kept with probability ``rate``, drawn from a generator seeded by (seed, step), so
a rerun keeps the same rows. A kept reply records its task item, as the rollout's row carries it (id,
question, the SHA-256 of every image, in order), the decoded completion, its reward and correctness, its
advantage (the mean over the reply's own tokens), its length in tokens and the sum of the rollout policy's
log-probs over its own tokens. The images' bytes travel with the sample so the recorder can save each image
once, under its hash.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from aerorl_ops.rows.task_item import TaskItem, image_sha256
from aerorl_ops.storage.training_schema import RolloutRow


@dataclass(frozen=True)
class RolloutSample(RolloutRow):
    """A ``training_rollouts`` row (its columns: ``storage.training_schema.RolloutRow``) and the images it saw."""

    images: tuple[bytes, ...] = ()  # the encoded images, in order (each saved once under its hash, not a column)


def sampled_rows(rows: int, rate: float, seed: int, step: int) -> list[int]:
    """The rows of a ``rows``-reply step kept at ``rate`` (the same rows for the same seed and step).

    >>> sampled_rows(8, 0.0, 0, 3), sampled_rows(8, 1.0, 0, 3)
    ([], [0, 1, 2, 3, 4, 5, 6, 7])
    >>> sampled_rows(64, 0.25, 1, 2) == sampled_rows(64, 0.25, 1, 2) != sampled_rows(64, 0.25, 1, 3)
    True
    """
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate must be in [0, 1], got {rate!r}")
    draw = random.Random(f"rollout-sample:{seed}:{step}")
    return [row for row in range(rows) if draw.random() < rate]


def rollout_samples(tokenizer, step: int, rows: Sequence[int], items: Sequence[TaskItem],
                    token_ids: torch.Tensor, lengths: torch.Tensor, own: torch.Tensor, rewards: torch.Tensor,
                    correct: torch.Tensor, advantages: torch.Tensor, logprob: torch.Tensor) -> list[RolloutSample]:
    """The samples of ``rows``: items [B] each row's task item, token_ids [B, W] replies, lengths [B], own
    [B, L] the reply's own tokens, rewards / correct [B], advantages / logprob [B, L] (L <= W)."""
    samples = []
    for row in rows:
        item = items[row]
        mask = own[row].to(torch.float64)
        counted = float(mask.sum())
        samples.append(RolloutSample(
            step, row, item.item_id, item.question, [image_sha256(image) for image in item.images],
            tokenizer.decode(token_ids[row, :int(lengths[row])].tolist(), skip_special_tokens=True).strip(),
            float(rewards[row]), bool(correct[row]),
            float((advantages[row].to(torch.float64) * mask).sum() / counted) if counted else 0.0,
            int(lengths[row]), float((logprob[row].to(torch.float64) * mask).sum()), tuple(item.images)))
    return samples
