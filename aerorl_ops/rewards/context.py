"""The values a reward reads and returns (AeroRL's ``RewardContext`` / ``RewardResult``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(slots=True)
class RewardContext:
    """One scored sample: the prompt, the model's response, the reference(s), metadata.

    ``reference`` is one string, a list of accepted aliases, or None. ``metadata`` holds
    ``evidence_entities``, ``claimed_entities``, ``latency_ms`` and anything else the
    generation stage recorded (``dataset``, ``raw_response``, ...).
    """

    prompt: str
    response: str
    reference: str | list[str] | tuple[str, ...] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class RewardResult:
    """One component's score for one sample, with the facts that explain it."""

    name: str
    score: float
    details: dict[str, Any] = field(default_factory=dict)


class RewardFunction(Protocol):
    """A reward component: a named callable from a context to a result."""

    name: str

    def __call__(self, context: RewardContext) -> RewardResult: ...


RewardCallable = Callable[[RewardContext], RewardResult | float]
"""What a stack accepts: a ``RewardFunction`` or any callable returning a float or result."""
