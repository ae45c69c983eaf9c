"""Verifier components scored by a standard benchmark metric instead of AeroRL's match rule.

``VERIFIER_MODES`` maps a configuration name to the class that implements it; the
default ``"match"`` is AeroRL's ``VerifierReward``. Metric verifiers score in [0, 1]
and grade the answer: the JSON ``answer`` of the response when it has one, else the
whole response (see :func:`prediction_text`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aerorl_ops.config.rewards import VERIFIER
from aerorl_ops.metrics import anls, relaxed_accuracy
from aerorl_ops.rewards.components import VerifierReward
from aerorl_ops.rewards.context import RewardContext, RewardResult
from aerorl_ops.text.answers import extract_answer


def prediction_text(response: str, metadata: dict[str, Any] | None = None) -> str:
    """The text a benchmark metric grades: the JSON ``answer`` when the response carries one
    (the benchmark prompt asks for ``{"answer": ...}``), else the whole response.

    ``metadata["raw_response"]`` is the model's raw decoded output (special tokens included)
    and is never graded.

    >>> prediction_text('{"answer": "7"}'), prediction_text("7", {"raw_response": "7<|im_end|>"})
    ('7', '7')
    """
    answer = extract_answer(response)
    return response if answer is None else answer


def metric_references(reference: Any) -> list[str]:
    """Reference strings as a metric sees them: unstripped, blank ones dropped.

    >>> metric_references([" 12 ", "", None]), metric_references("Paris"), metric_references(None)
    ([' 12 ', 'None'], ['Paris'], [])
    """
    if reference is None:
        return []
    items = reference if isinstance(reference, (list, tuple, set)) else [reference]
    return [str(item) for item in items if str(item).strip()]


def _missing(name: str) -> RewardResult:
    return RewardResult(name=name, score=0.0, details={"reason": "missing_reference"})


@dataclass(slots=True)
class AnlsVerifierReward:
    """DocVQA's ANLS of the answer against the references (0 below ``threshold``).

    >>> AnlsVerifierReward()(RewardContext("p", "Pariss", reference=["Paris"])).score
    0.8333333333333334
    """

    threshold: float = 0.5
    name: str = VERIFIER

    def __call__(self, context: RewardContext) -> RewardResult:
        references = metric_references(context.reference)
        if not references:
            return _missing(self.name)
        score = anls(prediction_text(context.response, context.metadata), references, self.threshold)
        return RewardResult(name=self.name, score=score, details={"anls": score, "reference_count": len(references)})


@dataclass(slots=True)
class RelaxedAccuracyVerifierReward:
    """ChartQA's relaxed accuracy: 1.0 if the answer matches any reference, else 0.0.

    >>> RelaxedAccuracyVerifierReward()(RewardContext("p", "10.4", reference=["7", "10"])).score
    1.0
    """

    tolerance: float = 0.05
    name: str = VERIFIER

    def __call__(self, context: RewardContext) -> RewardResult:
        references = metric_references(context.reference)
        if not references:
            return _missing(self.name)
        prediction = prediction_text(context.response, context.metadata)
        score = max(relaxed_accuracy(prediction, reference, self.tolerance) for reference in references)
        return RewardResult(
            name=self.name, score=score, details={"relaxed_accuracy": score, "reference_count": len(references)}
        )


VERIFIER_MODES: dict[str, type] = {
    "match": VerifierReward,
    "anls": AnlsVerifierReward,
    "relaxed_accuracy": RelaxedAccuracyVerifierReward,
}


def verifier_for_mode(mode: str) -> Any:
    """A default-configured verifier for ``mode`` (one of ``VERIFIER_MODES``).

    >>> type(verifier_for_mode("anls")).__name__
    'AnlsVerifierReward'
    """
    try:
        return VERIFIER_MODES[mode]()
    except KeyError:
        raise ValueError(f"unknown verifier mode {mode!r}; choose one of {sorted(VERIFIER_MODES)}") from None
