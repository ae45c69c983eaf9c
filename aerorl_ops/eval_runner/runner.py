"""``evaluate_model``: MAYE's evaluation scheme for one model on a task environment.

For each sampling setting (default: MAYE's three, ``aerorl_ops.eval_metrics.sampling``), every item
at ``indices`` gets ``setting.n`` responses (``replies.sample_responses``), in generate calls of at
most ``batch_size`` sequences (``batch_size // n`` questions). Each response is graded by
``env.step`` from the item's initial state: its ``correct`` flag, reward, length in tokens (EOS
excluded), whether it was cut at ``max_new_tokens`` and whether it holds one of MAYE's reflection
words. ``summaries.setting_metrics`` turns them into pass@k, length and reflection metrics, overall
and per question type; on a mixture (``envs.mixture``) each response also names its item's source
dataset (``SampleRecord.source``), and the metrics follow per source too.

On a multi-turn environment (``envs.base.max_turns`` > 1) a response is a whole episode, played by the
caller's ``play`` (``rl.step.multi_turn.sample_episodes``) at the setting's sampling: ``correct`` is its
success, ``reward`` its return, ``turns`` its replies (``SettingMetrics.mean_turns`` their mean), and
``response`` (its length, whether it was cut) its last reply.

Generation call ``b`` of setting ``s`` is seeded from ``(seed, s, b)``: the same model, items,
settings, ``batch_size`` and seed give the same responses. A trainer can call this on its live
policy: the policy's training flag and the global RNG state are left as they were.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch

from aerorl_ops.envs.base import TaskEnv, items_at, max_turns
from aerorl_ops.envs.mixture import mixture_sources
from aerorl_ops.envs.types import Completion
from aerorl_ops.eval_metrics.reflection import REFLECTION_WORDS, has_reflection
from aerorl_ops.eval_metrics.sampling import MAYE_SAMPLING_SETTINGS, SamplingSetting
from aerorl_ops.eval_runner.episodes import Graded, Replies, Sampling
from aerorl_ops.eval_runner.replies import encode_observations, sample_responses
from aerorl_ops.eval_runner.summaries import SettingMetrics, question_scores, setting_metrics
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rows.task_item import TaskItem
from aerorl_ops.storage.eval_schema import ALL_SOURCES, ALL_TYPES, SampleRecord


@dataclass(frozen=True)
class EvalOutcome:
    """Every response and every metric of one model's evaluation."""

    indices: tuple[int, ...]
    settings: tuple[SamplingSetting, ...]
    max_new_tokens: int
    seed: int
    samples: tuple[SampleRecord, ...]
    metrics: tuple[SettingMetrics, ...]
    setting_wall_s: Mapping[str, float] = field(default_factory=dict)

    @property
    def wall_s(self) -> float:
        return float(sum(self.setting_wall_s.values()))

    def setting(self, name: str) -> SamplingSetting:
        for setting in self.settings:
            if setting.name == name:
                return setting
        raise KeyError(f"no setting {name!r} in this evaluation; it has {[s.name for s in self.settings]}")

    def metric(self, setting: str, question_type: str = ALL_TYPES, source: str = ALL_SOURCES) -> SettingMetrics:
        for row in self.metrics:
            if (row.setting, row.question_type, row.source) == (setting, question_type, source):
                return row
        raise KeyError(f"no metrics for setting {setting!r}, question type {question_type!r} and source {source!r}")

    def question_types(self) -> list[str]:
        """The question types present, sorted (``"all"`` not included)."""
        return sorted({row.question_type for row in self.metrics} - {ALL_TYPES})

    def sources(self) -> list[str]:
        """The source datasets reported on (a mixture's parts with an evaluated item, in its order); [] for
        an evaluation of one dataset."""
        return list(dict.fromkeys(row.source for row in self.metrics if row.source != ALL_SOURCES))

    def question_scores(self, setting: str, question_type: str = ALL_TYPES,
                        source: str = ALL_SOURCES) -> tuple[list[int], np.ndarray]:
        """Per question (in ``indices`` order, of one type or all, of one source or all) the setting's pass@k
        estimate."""
        chosen = [s for s in self.samples if s.setting == setting
                  and (question_type == ALL_TYPES or s.question_type == question_type)
                  and (source == ALL_SOURCES or s.source == source)]
        return question_scores(self.setting(setting), chosen)

    def scalars(self, prefix: str = "eval") -> dict[str, float]:
        """Overall metrics as ``{prefix}/{setting}/{metric}`` -> value (NULL ratios left out), for loggers; the
        accuracy per question type as ``{prefix}/{setting}/{type}/accuracy`` and per source as
        ``{prefix}/{setting}/source/{source}/accuracy``."""
        names = ("accuracy", "pass_at_1", "reward_mean", "mean_length", "length_clip_ratio", "reflection_ratio",
                 "reflection_ratio_in_correct", "reflection_ratio_in_incorrect", "correct_ratio_in_reflection",
                 "correct_ratio_in_no_reflection")
        values = {}
        for row in self.metrics:
            tag = f"{prefix}/{row.setting}"
            tag += "" if row.question_type == ALL_TYPES else f"/{row.question_type}"
            tag += "" if row.source == ALL_SOURCES else f"/source/{row.source}"
            overall = (row.question_type, row.source) == (ALL_TYPES, ALL_SOURCES)
            for name in names if overall else ("accuracy",):
                value = getattr(row, name)
                if value is not None:
                    values[f"{tag}/{name}"] = float(value)
        return values


def _batches(indices: Sequence[int], size: int) -> list[Sequence[int]]:
    return [indices[start:start + size] for start in range(0, len(indices), size)]


def batch_seed(seed: int, setting_no: int, batch_no: int) -> int:
    """The seed of one generate call: a hash of the three numbers (stable across runs and platforms)."""
    return int(np.random.SeedSequence([seed, setting_no, batch_no]).generate_state(1)[0])


class PlayedEpisodes(Protocol):
    """What playing episodes gives (``rl.step.multi_turn.Episodes``): per episode, its last reply, its graded
    outcome (reward: the return; correct: success), which completion tokens are the model's own, its turns."""

    replies: Replies
    graded: Graded
    actions: list[list[bool]]
    turns: list[int]


class EpisodePlayer(Protocol):
    """Plays one episode per item to its end, greedy when ``sampling`` is None (``rl.step.multi_turn
    .sample_episodes``, which the layers above pass in: this layer cannot import it)."""

    def __call__(self, loaded: LoadedVLM, env: TaskEnv, items: Sequence[TaskItem], max_new_tokens: int,
                 sampling: Sampling | None) -> PlayedEpisodes: ...


def last_reply_tokens(own: Sequence[bool]) -> int:
    """The tokens of an episode's last reply: the last run of the model's own tokens in its completion.

    >>> last_reply_tokens([True, True, False, False, True, True, True])
    3
    """
    count = 0
    for mine in reversed(own):
        if not mine and count:
            break
        count += bool(mine)
    return count


def _episode_records(loaded: LoadedVLM, env: TaskEnv, indices: Sequence[int], setting: SamplingSetting,
                     setting_no: int, max_new_tokens: int, batch_size: int, seed: int, words: tuple[str, ...],
                     mixture: bool, play: EpisodePlayer) -> list[SampleRecord]:
    """A multi-turn environment's responses: ``setting.n`` whole episodes per item, each seeded per batch as a
    single-turn batch is; a record's response, length and truncation are the episode's last reply's."""
    sampling = None if setting.greedy else Sampling(setting.temperature, 0, setting.top_p)
    records: list[SampleRecord] = []
    for batch_no, batch in enumerate(_batches(indices, max(1, batch_size // setting.n))):
        items = [item for item in items_at(env, batch) for _ in range(setting.n)]
        with torch.random.fork_rng():
            torch.manual_seed(batch_seed(seed, setting_no, batch_no))
            played = play(loaded, env, items, max_new_tokens, sampling)
        for row, item in enumerate(items):
            question, sample_no = divmod(row, setting.n)
            text = played.replies.texts[row]
            records.append(SampleRecord(
                setting=setting.name, item_index=batch[question], item_id=item.item_id,
                question_type=item.question_type, sample_no=sample_no, response=text,
                correct=bool(played.graded.correct[row]), reward=float(played.graded.rewards[row]),
                response_tokens=last_reply_tokens(played.actions[row]), truncated=played.replies.truncated[row],
                reflection=has_reflection(text, words), source=item.dataset if mixture else None,
                turns=played.turns[row]))
    return records


def _evaluate_setting(loaded: LoadedVLM, env: TaskEnv, indices: Sequence[int], setting: SamplingSetting,
                      setting_no: int, max_new_tokens: int, batch_size: int, seed: int,
                      words: tuple[str, ...], mixture: bool, play: EpisodePlayer | None) -> list[SampleRecord]:
    if max_turns(env) > 1:
        if play is None:
            raise ValueError(f"environment {env.name!r} is multi-turn (up to {max_turns(env)} turns): evaluating it "
                             "plays whole episodes, so pass play= (rl.step.multi_turn.sample_episodes)")
        return _episode_records(loaded, env, indices, setting, setting_no, max_new_tokens, batch_size, seed, words,
                                mixture, play)
    records: list[SampleRecord] = []
    for batch_no, batch in enumerate(_batches(indices, max(1, batch_size // setting.n))):
        episodes = [env.reset(item) for item in items_at(env, batch)]
        inputs = encode_observations(loaded, [observation for _, observation in episodes])
        responses = sample_responses(loaded, inputs, setting, max_new_tokens, batch_seed(seed, setting_no, batch_no))
        for row, (ids, text, truncated) in enumerate(zip(*responses, strict=True)):
            question, sample_no = divmod(row, setting.n)
            state, index = episodes[question][0], batch[question]
            result = env.step(state, Completion(text, tuple(ids)))
            item = state.item
            records.append(SampleRecord(
                setting=setting.name, item_index=index, item_id=item.item_id, question_type=item.question_type,
                sample_no=sample_no, response=text, correct=bool(result.info.correct), reward=float(result.reward),
                response_tokens=len(ids), truncated=truncated, reflection=has_reflection(text, words),
                source=item.dataset if mixture else None))
    return records


def evaluate_model(loaded: LoadedVLM, env: TaskEnv, indices: Sequence[int],
                   settings: Sequence[SamplingSetting] = MAYE_SAMPLING_SETTINGS, *, max_new_tokens: int,
                   batch_size: int, seed: int = 0, reflection_words: Sequence[str] = REFLECTION_WORDS,
                   on_setting: Callable[[SamplingSetting, float], None] | None = None,
                   play: EpisodePlayer | None = None) -> EvalOutcome:
    """Every setting's responses to the items at ``indices``, graded, with their metrics.

    A response reflects when it holds one of ``reflection_words`` (MAYE's 15 by default; case-insensitive
    substrings). ``on_setting(setting, wall_s)`` is called after each setting (progress reporting). On a
    multi-turn environment each response is a whole episode played by ``play`` (required there).
    """
    indices = [int(index) for index in indices]
    if not indices:
        raise ValueError(f"environment {env.name!r}: no items to evaluate (indices is empty)")
    if len(set(indices)) != len(indices):
        raise ValueError(f"environment {env.name!r}: indices repeat an item; pass each question once")
    names = [setting.name for setting in settings]
    if not names or len(set(names)) != len(names):
        raise ValueError(f"sampling settings must be one or more, with distinct names; got {names}")
    if batch_size < 1 or max_new_tokens < 1:
        raise ValueError(f"batch_size and max_new_tokens must be >= 1, got {batch_size} and {max_new_tokens}")
    words, sources = tuple(reflection_words), mixture_sources(env)
    samples: list[SampleRecord] = []
    metrics: list[SettingMetrics] = []
    wall: dict[str, float] = {}
    for setting_no, setting in enumerate(settings):
        started = time.perf_counter()
        records = _evaluate_setting(loaded, env, indices, setting, setting_no, max_new_tokens, batch_size, seed,
                                    words, bool(sources), play)
        wall[setting.name] = time.perf_counter() - started
        samples += records
        metrics += setting_metrics(setting, records, max_new_tokens, words, sources)
        if on_setting is not None:
            on_setting(setting, wall[setting.name])
    return EvalOutcome(tuple(indices), tuple(settings), max_new_tokens, seed, tuple(samples), tuple(metrics), wall)
