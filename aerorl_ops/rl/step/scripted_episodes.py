"""Multi-turn episodes with given replies, teacher-forced: a supervised batch over every turn at once.

``scripted_batch(loaded, env, items, replies)`` plays each item's episode with ``replies[row]`` (one
text per turn, e.g. a planner's action words), and lays it out as ``rl.step.multi_turn.sample_episodes``
lays out a sampled one: the first turn's prompt, then each reply's tokens followed by the token that ends
an assistant turn (``models.end_of_turn``), then the environment's turn (its user turn and image, as
``env_turn`` writes it), and so on. The batch's ``completion_mask`` counts the replies' tokens (with
their end of turn) and never the environment's, so a masked NLL over it (``completion_logprobs``)
teaches every turn's reply in the conversation a rollout would hold. Replies that go on after the
episode ended are a ``ValueError`` naming the item.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.envs.types import Completion
from aerorl_ops.eval_runner.episodes import observe_all
from aerorl_ops.models.end_of_turn import end_of_turn_id
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rl.step.multi_turn import EnvTurn, encode_episodes, env_turn
from aerorl_ops.rl.step.sequences import SequenceBatch, append_completions
from aerorl_ops.rows.task_item import TaskItem


def _scripted(loaded: LoadedVLM, env: TaskEnv, item: TaskItem, texts: Sequence[str],
              end: int) -> tuple[list[int], list[bool], list[EnvTurn]]:
    """One episode: its completion ids, which of them are the replies', and the environment's later turns."""
    state, _ = env.reset(item)
    ids: list[int] = []
    own: list[bool] = []
    later: list[EnvTurn] = []
    for turn, text in enumerate(texts):
        reply = loaded.tokenizer.encode(text, add_special_tokens=False)
        ids += reply + [end]
        own += [True] * (len(reply) + 1)
        result = env.step(state, Completion(text, tuple(reply)))
        if turn + 1 == len(texts):
            break
        if result.done:
            raise ValueError(f"environment {env.name!r}, item {item.item_id!r}: the episode ended at turn {turn + 1} "
                             f"of the {len(texts)} replies given")
        written = env_turn(loaded, result.observation)
        later.append(written)
        ids += written.ids
        own += [False] * len(written.ids)
        state = result.state
    return ids, own, later


def scripted_batch(loaded: LoadedVLM, env: TaskEnv, items: Sequence[TaskItem],
                   replies: Sequence[Sequence[str]]) -> SequenceBatch:
    """Each item's episode with its ``replies``, as one teacher-forced batch (module docstring)."""
    end = end_of_turn_id(loaded.processor, loaded.source.label)
    episodes = [_scripted(loaded, env, item, texts, end) for item, texts in zip(items, replies, strict=True)]
    batch = append_completions(encode_episodes(loaded, observe_all(env, items), [later for _, _, later in episodes]),
                               [ids for ids, _, _ in episodes], loaded)
    prompt = batch.input_ids.shape[1] - max(len(ids) for ids, _, _ in episodes)  # P: the prompts' width
    mask = batch.completion_mask.clone()  # [B, P + C]
    for row, (_, own, _) in enumerate(episodes):
        mask[row, prompt:prompt + len(own)] = torch.tensor(own, dtype=torch.bool)
    return batch._replace(completion_mask=mask)
