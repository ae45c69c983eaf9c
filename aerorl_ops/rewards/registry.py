"""Reward components by configuration name, and the check for a weights mapping.

The names are declared once, in ``config.rewards.REWARD_COMPONENT_NAMES``; this module maps
each to its class and refuses to import if the two disagree (a name without a class, a class
reporting under another name).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Real

from aerorl_ops.config.rewards import COST, FORMAT, GROUNDING, REWARD_COMPONENT_NAMES, VERIFIER
from aerorl_ops.rewards.components import CostReward, FormatReward, GroundingReward, VerifierReward

REWARD_COMPONENTS: Mapping[str, type] = {
    VERIFIER: VerifierReward,
    GROUNDING: GroundingReward,
    FORMAT: FormatReward,
    COST: CostReward,
}


def check_registry(components: Mapping[str, type], names: tuple[str, ...]) -> None:
    """Raise ``RuntimeError`` unless ``components`` has exactly ``names``, in order, and each
    class reports under its own name.

    >>> check_registry({"cost": VerifierReward}, ("cost",))
    Traceback (most recent call last):
    ...
    RuntimeError: reward component 'cost' maps to VerifierReward, which reports as 'verifier'
    """
    if tuple(components) != names:
        raise RuntimeError(f"reward registry {tuple(components)} disagrees with REWARD_COMPONENT_NAMES {names}")
    for name, cls in components.items():
        reported = cls().name
        if reported != name:
            raise RuntimeError(f"reward component {name!r} maps to {cls.__name__}, which reports as {reported!r}")


check_registry(REWARD_COMPONENTS, REWARD_COMPONENT_NAMES)


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
