"""A weighted sum of reward components, and AeroRL's builders for the default stack."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aerorl_ops.aerorl_compat import AERORL_REWARDS
from aerorl_ops.rewards.components import CostReward, FormatReward, GroundingReward
from aerorl_ops.rewards.context import RewardCallable, RewardContext, RewardResult
from aerorl_ops.rewards.verifiers import verifier_for_mode

UNKNOWN_COMPONENT_WEIGHT = 1.0


def component_name(reward_fn: RewardCallable) -> str:
    """The name a component is reported under: its ``name`` attribute, else its ``__name__``.

    >>> def brevity(context): return 1.0
    >>> component_name(brevity), component_name(CostReward())
    ('brevity', 'cost')
    """
    name = getattr(reward_fn, "name", None)
    if isinstance(name, str) and name:
        return name
    return getattr(reward_fn, "__name__", type(reward_fn).__name__)


def run_component(reward_fn: RewardCallable, context: RewardContext) -> RewardResult:
    """Call one component; a bare number it returns becomes a ``RewardResult``.

    >>> run_component(lambda context: 0.5, RewardContext("p", "r"))
    RewardResult(name='<lambda>', score=0.5, details={})
    """
    result = reward_fn(context)
    if isinstance(result, RewardResult):
        return result
    return RewardResult(name=component_name(reward_fn), score=float(result))


@dataclass(slots=True)
class WeightedRewardStack:
    """Scores a context with every component; total = sum of weight * score, 6 places.

    A component whose name has no weight counts with weight 1.0. If two components
    share a name, both count in the total and the later one is reported.
    """

    reward_functions: list[RewardCallable]
    weights: dict[str, float]

    def evaluate(self, context: RewardContext) -> dict[str, Any]:
        component_scores: dict[str, float] = {}
        component_details: dict[str, dict[str, Any]] = {}
        total = 0.0
        for reward_fn in self.reward_functions:
            result = run_component(reward_fn, context)
            component_scores[result.name] = result.score
            component_details[result.name] = result.details
            total += self.weight_of(result.name) * result.score
        return {"total_reward": round(total, 6), "components": component_scores, "details": component_details}

    def weight_of(self, name: str) -> float:
        return self.weights.get(name, UNKNOWN_COMPONENT_WEIGHT)


def build_default_reward_stack() -> WeightedRewardStack:
    """AeroRL's default stack (``aerorl_compat.AERORL_REWARDS``): verifier .4, grounding .3, format .2, cost .1."""
    return build_reward_stack()


def build_reward_stack(
    *,
    weights: Mapping[str, float] | None = None,
    require_json: bool = AERORL_REWARDS.require_json,
    regex_pattern: str | None = AERORL_REWARDS.regex_pattern,
    target_tokens: int = AERORL_REWARDS.target_tokens,
    latency_budget_ms: float = AERORL_REWARDS.latency_budget_ms,
    verifier_mode: str = "match",
) -> WeightedRewardStack:
    """The four standard components, by default with AeroRL's settings (``AERORL_REWARDS``);
    ``weights`` override AeroRL's weights name by name.

    ``verifier_mode`` (an addition to AeroRL) picks the verifier from ``VERIFIER_MODES``.

    >>> stack = build_reward_stack(weights={"cost": 0.0})
    >>> stack.evaluate(RewardContext("p", "stop", reference="stop"))["total_reward"]
    0.6
    """
    rewards: list[RewardCallable] = [
        verifier_for_mode(verifier_mode),
        GroundingReward(),
        FormatReward(require_json=require_json, regex_pattern=regex_pattern),
        CostReward(target_tokens=target_tokens, latency_budget_ms=latency_budget_ms),
    ]
    merged_weights = dict(AERORL_REWARDS.weights)
    if weights:
        merged_weights.update(weights)
    return WeightedRewardStack(reward_functions=rewards, weights=merged_weights)
