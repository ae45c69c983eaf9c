"""Reward components by configuration name, and the check for a weights mapping."""

from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Real

from aerorl_ops.rewards.components import CostReward, FormatReward, GroundingReward, VerifierReward

REWARD_COMPONENTS: Mapping[str, type] = {
    "verifier": VerifierReward,
    "grounding": GroundingReward,
    "format": FormatReward,
    "cost": CostReward,
}


def validate_weights(weights: Mapping[str, object]) -> dict[str, float]:
    """Return ``weights`` as floats, or raise ``ValueError`` naming the offending key.

    Keys must be names in ``REWARD_COMPONENTS``; values finite real numbers (not bools).

    >>> validate_weights({"verifier": 1, "cost": 0.25})
    {'verifier': 1.0, 'cost': 0.25}
    >>> validate_weights({"verifer": 1.0})
    Traceback (most recent call last):
    ...
    ValueError: weights: unknown reward component 'verifer'; known components: cost, format, grounding, verifier
    """
    checked: dict[str, float] = {}
    for name, value in weights.items():
        if name not in REWARD_COMPONENTS:
            known = ", ".join(sorted(REWARD_COMPONENTS))
            raise ValueError(f"weights: unknown reward component {name!r}; known components: {known}")
        if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
            raise ValueError(f"weights: weight for {name!r} must be a finite number, got {value!r}")
        checked[name] = float(value)
    return checked
