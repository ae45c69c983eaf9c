"""Sample G completions per prompt from the policy and score them with the reward stack."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import NamedTuple

import torch

from aerorl_ops.config.rewards import REWARD_COMPONENT_NAMES
from aerorl_ops.generation.batched import encode_prompts, eos_token_ids, trim_after_eos
from aerorl_ops.generation.prompts import user_prompt
from aerorl_ops.generation.records import claimed_entities
from aerorl_ops.generation.suppression import suppressed_token_ids
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rewards.context import RewardContext
from aerorl_ops.rl.config import AeroRLConfig
from aerorl_ops.rl.sequences import SequenceBatch, append_completions
from aerorl_ops.rows.row import Row


class Rewards(NamedTuple):
    total: torch.Tensor  # [B]
    components: dict[str, torch.Tensor]  # name -> [B]


class Rollout(NamedTuple):
    rows: list[Row]  # [B] prompts repeated group_size times, groups contiguous
    responses: list[str]  # [B]
    batch: SequenceBatch
    rewards: Rewards
    generation_s: float


def repeat_rows(rows: Sequence[Row], group_size: int) -> list[Row]:
    return [row for row in rows for _ in range(group_size)]


def sample_completions(loaded: LoadedVLM, rows: Sequence[Row],
                       config: AeroRLConfig) -> tuple[SequenceBatch, list[str], float]:
    """One sampled completion per row (top_k=0, top_p=1 unless configured), as a SequenceBatch.

    Special tokens other than EOS are never sampled (see ``aerorl_ops.generation.suppression``).
    """
    model = loaded.model
    inputs = encode_prompts(loaded, rows)
    eos = eos_token_ids(loaded)
    suppress = suppressed_token_ids(loaded.tokenizer, eos, model.get_output_embeddings().weight.shape[0])
    was_training = model.training
    model.eval()
    started = time.perf_counter()
    with torch.no_grad():
        output = model.generate(**inputs, do_sample=True, temperature=config.temperature, top_k=config.top_k,
                                top_p=config.top_p, max_new_tokens=config.max_new_tokens,
                                pad_token_id=loaded.tokenizer.pad_token_id, eos_token_id=eos,
                                suppress_tokens=suppress)
    elapsed = time.perf_counter() - started
    model.train(was_training)
    prompt_length = inputs["input_ids"].shape[1]
    completions = [trim_after_eos(ids, eos) for ids in output[:, prompt_length:].cpu().tolist()]
    texts = [loaded.tokenizer.decode(ids, skip_special_tokens=True).strip() for ids in completions]
    batch = append_completions(inputs, completions, loaded.tokenizer.pad_token_id, model.config)
    return batch, texts, elapsed


def reward_context(row: Row, response: str, generated_tokens: int) -> RewardContext:
    """The reward stack's view of one training sample. Latency is not a training signal: 0 ms."""
    return RewardContext(
        prompt=user_prompt(row.question),
        response=response,
        reference=list(row.answers),
        metadata={"evidence_entities": list(row.evidence_entities), "claimed_entities": claimed_entities(response),
                  "latency_ms": 0.0, "generated_tokens": generated_tokens, "dataset": row.dataset},
    )


def score_responses(reward_stack, rows: Sequence[Row], responses: Sequence[str],
                    generated_tokens: Sequence[int]) -> Rewards:
    results = [reward_stack.evaluate(reward_context(row, text, n))
               for row, text, n in zip(rows, responses, generated_tokens, strict=True)]
    total = torch.tensor([r["total_reward"] for r in results], dtype=torch.float32)
    components = {name: torch.tensor([r["components"].get(name, 0.0) for r in results], dtype=torch.float32)
                  for name in REWARD_COMPONENT_NAMES}
    return Rewards(total, components)


def collect_rollout(loaded: LoadedVLM, prompts: Sequence[Row], config: AeroRLConfig, reward_stack) -> Rollout:
    rows = repeat_rows(prompts, config.group_size)
    batch, texts, elapsed = sample_completions(loaded, rows, config)
    lengths = batch.completion_mask.sum(dim=1).tolist()
    rewards = score_responses(reward_stack, rows, texts, lengths)
    return Rollout(rows, texts, batch, rewards, elapsed)


def answer_target(row: Row) -> str:
    """What the supervised warm-up teaches the model to say for ``row``."""
    return json.dumps({"answer": row.answers[0]})


def supervised_batch(loaded: LoadedVLM, rows: Sequence[Row]) -> SequenceBatch:
    """Prompts followed by their target answers (and EOS): the warm-up's teacher-forced batch."""
    inputs = encode_prompts(loaded, rows)
    eos = eos_token_ids(loaded)[0]
    targets = [loaded.tokenizer.encode(answer_target(row), add_special_tokens=False) + [eos] for row in rows]
    return append_completions(inputs, targets, loaded.tokenizer.pad_token_id, loaded.model.config)
