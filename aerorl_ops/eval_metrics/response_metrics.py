"""MAYE's response metrics of one set of responses: length, length-clip ratio and reflection.

See ``lengths`` and ``reflection`` for the formulas. ``as_dict`` flattens the result into
metric name -> value, keeping ``None`` for the ratios that have no denominator.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from aerorl_ops.eval_metrics.lengths import LengthMetrics, length_metrics
from aerorl_ops.eval_metrics.reflection import (
    REFLECTION_WORDS,
    ReflectionMetrics,
    reflection_metrics,
)


@dataclass(frozen=True)
class ResponseMetrics:
    """Length and reflection metrics of the same responses."""

    length: LengthMetrics
    reflection: ReflectionMetrics

    def as_dict(self) -> dict[str, float | int | None]:
        """Every field of both parts in one flat mapping (``n_responses``, the same in both, appears once)."""
        return {**asdict(self.length), **asdict(self.reflection)}


def response_metrics(
    responses: Sequence[str],
    token_lengths: Any,
    correct: Any,
    max_length: int,
    words: Iterable[str] = REFLECTION_WORDS,
) -> ResponseMetrics:
    """Response metrics of ``responses``, their generated-token counts and correctness.

    >>> m = response_metrics(["Wait, red.", "Blue"], token_lengths=[4, 8], correct=[True, False], max_length=8)
    >>> m.length.mean_length, m.length.length_clip_ratio, m.reflection.reflection_ratio_in_correct
    (6.0, 0.5, 1.0)
    >>> m.as_dict()["reflection_ratio_in_incorrect"]
    0.0
    """
    length = length_metrics(token_lengths, max_length)
    reflection = reflection_metrics(responses, correct, words)
    if length.n_responses != reflection.n_responses:
        raise ValueError(
            f"{len(responses)} responses but {length.n_responses} token lengths; pass one length per response"
        )
    return ResponseMetrics(length=length, reflection=reflection)
