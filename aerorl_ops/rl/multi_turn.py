"""Multi-turn episodes: the model replies, the environment answers, up to the environment's ``max_turns``.

An environment's ``step`` may return ``done = False`` with an observation: a user turn (text) appended
to the conversation. Each row's completion is then its first reply, the environment's tokens (the
reply's end-of-turn token if the model did not write it, the user turn and the assistant header, as
the model's chat template writes them: :func:`env_turn_ids`), its next reply, and so on. The
``action`` mask is 1 at the model's own tokens and 0 at the environment's: the trainer's loss mask is
the response mask times it, so environment tokens have interior gaps in the mask and never enter the
loss (their log-probs are computed with the rest and multiplied out). Each turn's reward sits at the
last token of that turn's reply (``turn_rewards``): per-turn rewards, or per-episode ones where the
environment gives 0 until its last turn.

A later turn is generated from the conversation so far: the first turn's prompt (with its images)
followed by the completion tokens, moved flush right (``left_padded``) so ``generate`` continues each
row. Observations after the first carry text only; one with images is an error (not supported yet).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import torch

from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.envs.types import Completion, Observation
from aerorl_ops.eval_runner.episodes import Graded, Replies, Sampling, generate_replies
from aerorl_ops.eval_runner.replies import encode_observations
from aerorl_ops.generation.batched import eos_token_ids
from aerorl_ops.models.family_parts import end_of_turn_id
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rl.sequences import TOKEN_TYPE_INPUTS, SequenceBatch, append_completions

PROBE = [{"role": "user", "content": [{"type": "text", "text": "?"}]},
         {"role": "assistant", "content": [{"type": "text", "text": "x"}]}]
"""A one-exchange conversation: what the chat template writes after it is an environment turn's tokens."""


def max_turns(env: TaskEnv) -> int:
    """The environment's turns per episode at most (1 for a single-turn one)."""
    return int(getattr(env, "max_turns", 1))


def env_turn_ids(loaded: LoadedVLM, observation: Observation) -> list[int]:
    """The tokens the chat template writes after an assistant turn's end-of-turn token, for the user
    turn ``observation`` and the next assistant header."""
    if observation.images:
        raise ValueError("an environment turn with images is not supported yet: observations after the first "
                         "turn carry text only")
    texts = tuple(part["text"] for message in observation.messages for part in message["content"]
                  if part.get("type") == "text")
    return list(_env_turn_ids(loaded.processor, loaded.tokenizer, end_of_turn_id(loaded.model, loaded.tokenizer),
                              tuple(message["role"] for message in observation.messages), texts))


@lru_cache(maxsize=64)
def _env_turn_ids(processor, tokenizer, end: int, roles: tuple[str, ...], texts: tuple[str, ...]) -> tuple[int, ...]:
    turn = [{"role": role, "content": [{"type": "text", "text": text}]} for role, text in zip(roles, texts,
                                                                                             strict=True)]
    before = tokenizer(processor.apply_chat_template(PROBE, tokenize=False), add_special_tokens=False).input_ids
    after = tokenizer(processor.apply_chat_template(PROBE + turn, add_generation_prompt=True, tokenize=False),
                      add_special_tokens=False).input_ids
    ends = [k for k, token in enumerate(before) if token == end]
    if not ends or after[:ends[-1] + 1] != before[:ends[-1] + 1]:
        raise ValueError("this model's chat template does not write an environment turn after a reply as a "
                         "continuation of the conversation; multi-turn episodes need one that does")
    return tuple(after[ends[-1] + 1:])


def left_padded(batch: SequenceBatch) -> dict[str, torch.Tensor]:
    """``batch``'s model inputs with each row's tokens moved flush right (padding all on the left), so
    ``generate`` continues every row; per-image tensors as they are."""
    attention = batch.inputs["attention_mask"]  # [B, T]
    width = attention.shape[1]
    last = width - 1 - torch.flip(attention, dims=[1]).argmax(dim=1)  # [B] last real position
    shifts = (width - 1 - last).tolist()
    inputs = dict(batch.inputs)
    for name in ("input_ids", "attention_mask", *TOKEN_TYPE_INPUTS):  # the trailing padding wraps to the front
        if name in inputs:
            inputs[name] = torch.stack([torch.roll(row, shift) for row, shift in zip(inputs[name], shifts,
                                                                                      strict=True)])
    return inputs


@dataclass
class Episode:
    """One row's episode so far."""

    completion: list[int] = field(default_factory=list)  # replies and environment tokens
    action: list[bool] = field(default_factory=list)  # per completion token: the model's own
    turn_rewards: list[tuple[int, float]] = field(default_factory=list)  # (completion position, reward)
    reply_texts: list[str] = field(default_factory=list)
    truncated: bool = False  # the last reply was cut at max_new_tokens
    correct: bool = False  # the environment's accuracy test at its last step
    components: dict[str, float] = field(default_factory=dict)
    prediction: str = ""


@dataclass(frozen=True)
class Episodes:
    """A part's episodes, as a rollout holds them."""

    replies: Replies  # completion ids (replies and environment tokens), the last reply's text, truncated
    graded: Graded  # rewards: the sum of each episode's turn rewards; correct at its last step
    actions: list[list[bool]]  # [B] per completion token: the model's own
    turn_rewards: list[list[tuple[int, float]]]  # [B] (completion position, reward) per turn
    turns: list[int]  # [B] replies written


def sample_episodes(loaded: LoadedVLM, env: TaskEnv, indices: Sequence[int], max_new_tokens: int,
                    sampling: Sampling | None) -> Episodes:
    """One episode per environment index (module docstring): sampled, or greedy when ``sampling`` is None."""
    eos, end = eos_token_ids(loaded), end_of_turn_id(loaded.model, loaded.tokenizer)
    started = [env.reset(index) for index in indices]
    states = [state for state, _ in started]
    observations = [observation for _, observation in started]
    episodes = [Episode() for _ in indices]
    active = list(range(len(indices)))
    for turn in range(max_turns(env)):
        prompts = encode_observations(loaded, [observations[row] for row in active])
        if turn == 0:
            inputs = prompts
        else:
            batch = append_completions(prompts, [episodes[row].completion for row in active],
                                       loaded.tokenizer.pad_token_id, loaded.model.config)
            inputs = left_padded(batch)
        replies = generate_replies(loaded, inputs, max_new_tokens, sampling)
        still = []
        for k, row in enumerate(active):
            ids, text, episode = replies.token_ids[k], replies.texts[k], episodes[row]
            result = env.step(states[row], Completion(text, tuple(t for t in ids if t not in eos)))
            episode.completion += ids
            episode.action += [True] * len(ids)
            episode.turn_rewards.append((len(episode.completion) - 1, result.reward))
            episode.reply_texts.append(text)
            episode.truncated = replies.truncated[k]
            episode.correct, episode.prediction = result.info.correct, result.info.prediction
            episode.components = dict(result.info.components)
            if result.done or turn + 1 == max_turns(env):
                continue
            closing = [] if ids and ids[-1] == end else [end]  # the reply's end of turn, when it did not write it
            tokens = closing + env_turn_ids(loaded, result.observation)
            episode.completion += tokens
            episode.action += [False] * len(tokens)
            states[row] = result.state
            still.append(row)
        active = still
        if not active:
            break
    names = sorted({name for episode in episodes for name in episode.components})
    graded = Graded(torch.tensor([sum(r for _, r in e.turn_rewards) for e in episodes], dtype=torch.float32),
                    torch.tensor([e.correct for e in episodes], dtype=torch.bool),
                    {name: torch.tensor([float(e.components.get(name, 0.0)) for e in episodes]) for name in names},
                    [e.prediction for e in episodes])
    return Episodes(Replies([e.completion for e in episodes], [e.reply_texts[-1] for e in episodes],
                            [e.truncated for e in episodes]), graded, [e.action for e in episodes],
                    [e.turn_rewards for e in episodes], [len(e.reply_texts) for e in episodes])


@dataclass(frozen=True)
class TwoTryReport:
    """A two-try environment's accuracies over ``n`` episodes (``envs.two_tries``)."""

    n: int
    first_try: float  # right at the first answer
    within_two_tries: float  # right at the first or the second
    revised: float  # of the wrong first answers, the share right at the second (0 when none was wrong)


def two_try_report(loaded: LoadedVLM, env: TaskEnv, indices: Sequence[int], max_new_tokens: int,
                   sampling: Sampling | None, batch_size: int = 64) -> TwoTryReport:
    """Episodes of ``indices`` (greedy when ``sampling`` is None), ``batch_size`` at a time, as a report."""
    first, within = [], []
    for start in range(0, len(indices), batch_size):
        episodes = sample_episodes(loaded, env, indices[start:start + batch_size], max_new_tokens, sampling)
        first += episodes.graded.components["first_try_correct"].bool().tolist()
        within += episodes.graded.correct.tolist()
    wrong_first = len(first) - sum(first)
    revised = sum(w and not f for f, w in zip(first, within, strict=True))
    return TwoTryReport(len(first), sum(first) / len(first), sum(within) / len(within),
                        revised / wrong_first if wrong_first else 0.0)
