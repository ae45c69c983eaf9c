"""MAYE's reflection metrics: how often responses contain a reflection word, and how that
relates to being correct (Ma et al., 2025, Table 2; GAIR-NLP/MAYE,
``recipes/full_ppo_vllm_distributed.py``, ``log_reflection_analysis``).

A response *reflects* when its lower-cased text contains any reflection word as a substring
(so ``"wait"`` also matches ``"awaited"``, as in MAYE). With ``N`` responses, ``N+`` correct,
``N_ref`` reflecting and ``N_ref+`` both::

    reflection_ratio               = N_ref / N
    reflection_ratio_in_correct    = N_ref+ / N+
    reflection_ratio_in_incorrect  = (N_ref - N_ref+) / (N - N+)
    correct_ratio_in_reflection    = N_ref+ / N_ref
    correct_ratio_in_no_reflection = (N+ - N_ref+) / (N - N_ref)

A ratio whose denominator is zero is ``None`` (NULL in SQL). MAYE logs 0.0 there instead,
which reads as a measurement; ``None`` keeps "no such responses" apart from "none reflected".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from aerorl_ops.eval_metrics.outcomes import as_binary

REFLECTION_WORDS: tuple[str, ...] = (
    "re-check",
    "re-evaluate",
    "re-examine",
    "re-think",
    "recheck",
    "reevaluate",
    "reexamine",
    "reevaluation",
    "rethink",
    "check again",
    "think again",
    "try again",
    "verify",
    "wait",
    "yet",
)
"""MAYE's 15 reflection words, matched as case-insensitive substrings."""


def has_reflection(response: str, words: Iterable[str] = REFLECTION_WORDS) -> bool:
    """True when ``response`` contains any of ``words``, ignoring case.

    >>> has_reflection("Wait, let me re-check the colour."), has_reflection("The shape is a circle.")
    (True, False)
    """
    text = response.lower()
    return any(word.lower() in text for word in words)


def reflection_word_counts(responses: Iterable[str], words: Sequence[str] = REFLECTION_WORDS) -> dict[str, int]:
    """Occurrences of each word across ``responses`` (non-overlapping, case-insensitive), as MAYE logs them.

    >>> reflection_word_counts(["Wait... wait, verify it.", "not yet"], words=["wait", "verify", "yet"])
    {'wait': 2, 'verify': 1, 'yet': 1}
    """
    texts = [response.lower() for response in responses]
    return {word: sum(text.count(word.lower()) for text in texts) for word in words}


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


@dataclass(frozen=True)
class ReflectionMetrics:
    """The counts and MAYE's five reflection ratios; a ratio is ``None`` where its denominator is 0."""

    n_responses: int
    n_correct: int
    n_reflection: int
    n_reflection_correct: int
    reflection_ratio: float | None
    reflection_ratio_in_correct: float | None
    reflection_ratio_in_incorrect: float | None
    correct_ratio_in_reflection: float | None
    correct_ratio_in_no_reflection: float | None


def reflection_ratios(reflects: Any, correct: Any) -> ReflectionMetrics:
    """The reflection metrics from per-response flags: reflects / is correct.

    >>> m = reflection_ratios(reflects=[True, True, False, False], correct=[True, False, False, False])
    >>> m.reflection_ratio, m.reflection_ratio_in_correct, m.correct_ratio_in_no_reflection
    (0.5, 1.0, 0.0)
    >>> reflection_ratios([False, False], [True, False]).correct_ratio_in_reflection is None
    True
    """
    reflect = as_binary(reflects, "reflects")
    right = as_binary(correct, "correct")
    if reflect.size != right.size:
        raise ValueError(
            f"reflects has {reflect.size} values but correct has {right.size}; pass one of each per response"
        )
    n = int(reflect.size)
    n_correct = int(right.sum())
    n_reflection = int(reflect.sum())
    n_both = int((reflect & right).sum())
    return ReflectionMetrics(
        n_responses=n,
        n_correct=n_correct,
        n_reflection=n_reflection,
        n_reflection_correct=n_both,
        reflection_ratio=_ratio(n_reflection, n),
        reflection_ratio_in_correct=_ratio(n_both, n_correct),
        reflection_ratio_in_incorrect=_ratio(n_reflection - n_both, n - n_correct),
        correct_ratio_in_reflection=_ratio(n_both, n_reflection),
        correct_ratio_in_no_reflection=_ratio(n_correct - n_both, n - n_reflection),
    )


def reflection_metrics(
    responses: Sequence[str], correct: Any, words: Iterable[str] = REFLECTION_WORDS
) -> ReflectionMetrics:
    """MAYE's reflection metrics of ``responses`` with their correctness.

    >>> m = reflection_metrics(["Wait, it is red.", "Blue.", "Let me verify: no."], [True, True, False])
    >>> m.n_reflection, m.reflection_ratio_in_correct, m.correct_ratio_in_reflection
    (2, 0.5, 0.5)
    """
    words = tuple(words)
    right = as_binary(correct, "correct")
    if len(responses) != right.size:
        raise ValueError(f"{len(responses)} responses but {right.size} correctness values; pass one per response")
    return reflection_ratios([has_reflection(response, words) for response in responses], right)
