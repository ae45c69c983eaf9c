"""The metrics of one sampling setting's responses, over all questions, per question type and per source.

For a setting that draws ``n`` responses per question and reports pass@``k``, with ``c_q`` of
question ``q``'s responses correct (``aerorl_ops.eval_metrics`` has the formulas):

- ``accuracy``: the mean over questions of the unbiased pass@k ``1 - C(n - c_q, k) / C(n, k)``, and
  ``accuracy_stderr`` its standard error (the spread of the per-question estimates / sqrt(questions));
- ``pass_at_1``: the share of all responses that are correct (equal to ``accuracy`` when k = 1);
- ``reward_mean``: the environment's mean reward per response;
- ``mean_length`` (tokens, EOS excluded) and ``length_clip_ratio`` (share that reached the cap);
- MAYE's reflection counts and five ratios, ``None`` where a denominator is zero.

``question_type`` is ``"all"`` for every question, else one type (items without a type count only in
``"all"``). On a mixture, the rows per source dataset follow, one per part in the mixture's order, each
over every question type (``question_type`` ``"all"``) of that part's questions; a part none of whose
items is among the evaluated questions has no row (there is no accuracy to report). ``source`` is
``"all"`` on every other row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np

from aerorl_ops.eval_metrics.pass_at_k import pass_at_k_per_question
from aerorl_ops.eval_metrics.reflection import REFLECTION_WORDS
from aerorl_ops.eval_metrics.response_metrics import response_metrics
from aerorl_ops.eval_metrics.sampling import SamplingSetting
from aerorl_ops.storage.eval_schema import ALL_SOURCES, ALL_TYPES, SettingMetrics


class GradedSample(Protocol):
    """What a per-sample record must say for the metrics (``storage.eval_schema.SampleRecord``)."""

    item_index: int
    item_id: str
    question_type: str | None
    source: str | None
    response: str
    correct: bool
    reward: float
    response_tokens: int


def correct_counts(samples: Iterable[GradedSample]) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Questions in order of first appearance, with their response counts ``n`` and correct counts ``c``.

    >>> from types import SimpleNamespace as S
    >>> correct_counts([S(item_index=3, correct=True), S(item_index=1, correct=False), S(item_index=3, correct=False)])
    ([3, 1], array([2, 1]), array([1, 0]))
    """
    totals: dict[int, list[int]] = {}
    for sample in samples:
        tally = totals.setdefault(sample.item_index, [0, 0])
        tally[0] += 1
        tally[1] += bool(sample.correct)
    counts = np.array(list(totals.values()), dtype=np.int64).reshape(-1, 2)  # [Q, 2]
    return list(totals), counts[:, 0], counts[:, 1]


def question_scores(setting: SamplingSetting, samples: Iterable[GradedSample]) -> tuple[list[int], np.ndarray]:
    """Each question's unbiased pass@k (questions in order of first appearance)."""
    indices, n, c = correct_counts(samples)
    return indices, pass_at_k_per_question(n, c, setting.k)


def _metrics(setting: SamplingSetting, question_type: str, samples: Sequence[GradedSample], max_new_tokens: int,
             words: Sequence[str], source: str = ALL_SOURCES) -> SettingMetrics:
    _, scores = question_scores(setting, samples)  # [Q]
    response = response_metrics([s.response for s in samples], [s.response_tokens for s in samples],
                                [s.correct for s in samples], max_new_tokens, words)
    reflection, length = response.reflection, response.length
    return SettingMetrics(
        setting=setting.name, question_type=question_type, k=setting.k, samples_per_question=setting.n,
        questions=int(scores.size), responses=len(samples), accuracy=float(scores.mean()),
        accuracy_stderr=float(scores.std() / np.sqrt(scores.size)),
        pass_at_1=reflection.n_correct / len(samples), reward_mean=float(np.mean([s.reward for s in samples])),
        mean_length=float(length.mean_length), length_clip_ratio=float(length.length_clip_ratio),
        n_correct=reflection.n_correct, n_reflection=reflection.n_reflection,
        reflection_ratio=reflection.reflection_ratio,
        reflection_ratio_in_correct=reflection.reflection_ratio_in_correct,
        reflection_ratio_in_incorrect=reflection.reflection_ratio_in_incorrect,
        correct_ratio_in_reflection=reflection.correct_ratio_in_reflection,
        correct_ratio_in_no_reflection=reflection.correct_ratio_in_no_reflection, source=source,
        mean_turns=_mean_turns(samples),
    )


def _mean_turns(samples: Sequence[GradedSample]) -> float | None:
    """The mean replies per episode of multi-turn samples (``turns`` set); None for single-turn ones."""
    turns = [turn for turn in (getattr(sample, "turns", None) for sample in samples) if turn is not None]
    return float(np.mean(turns)) if turns else None


def by_source(samples: Iterable[GradedSample], sources: Sequence[str]) -> dict[str, list[GradedSample]]:
    """``samples`` per source, in the order of ``sources`` (a mixture's parts), those with none left out;
    ``ValueError`` naming the item when a sample's source is not one of ``sources``, and for a part named
    ``"all"`` (the ``source`` of the rows over every source).

    >>> from types import SimpleNamespace as S
    >>> grouped = by_source([S(item_id="b/1", source="b"), S(item_id="a/1", source="a")], ["a", "b", "c"])
    >>> [(name, [s.item_id for s in group]) for name, group in grouped.items()]
    [('a', ['a/1']), ('b', ['b/1'])]
    """
    if ALL_SOURCES in sources:
        raise ValueError(f"a mixture's part is named {ALL_SOURCES!r}, the name of the metrics over every part; "
                         f"rename that [datasets.{ALL_SOURCES}] table")
    grouped: dict[str, list[GradedSample]] = {source: [] for source in sources}
    for sample in samples:
        if sample.source not in grouped:
            raise ValueError(f"item {sample.item_id!r}: its source {sample.source!r} is none of the mixture's "
                             f"parts {list(sources)}")
        grouped[sample.source].append(sample)
    return {source: group for source, group in grouped.items() if group}


def setting_metrics(setting: SamplingSetting, samples: Sequence[GradedSample], max_new_tokens: int,
                    words: Sequence[str] = REFLECTION_WORDS, sources: Sequence[str] = ()) -> list[SettingMetrics]:
    """The metrics over all of ``samples`` (one setting's), then per question type in sorted order, then
    per source in the order of ``sources`` (a mixture's parts; none when empty; module docstring); a
    response reflects when it holds one of ``words``."""
    if not samples:
        raise ValueError(f"setting {setting.name!r}: no responses to summarise")
    by_type: dict[str, list[GradedSample]] = {}
    for sample in samples:
        if sample.question_type is not None:
            by_type.setdefault(sample.question_type, []).append(sample)
    per_source = by_source(samples, sources) if sources else {}
    return [_metrics(setting, ALL_TYPES, samples, max_new_tokens, words),
            *(_metrics(setting, name, by_type[name], max_new_tokens, words) for name in sorted(by_type)),
            *(_metrics(setting, ALL_TYPES, group, max_new_tokens, words, source)
              for source, group in per_source.items())]
