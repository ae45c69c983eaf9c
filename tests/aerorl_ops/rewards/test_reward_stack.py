"""The weighted stack, its builders, custom components and the weights check."""

from __future__ import annotations

import math

import pytest

from aerorl_ops.aerorl_compat import AERORL_REWARDS
from aerorl_ops.rewards import (
    REWARD_COMPONENTS,
    AnlsVerifierReward,
    CostReward,
    FormatReward,
    GroundingReward,
    RewardContext,
    RewardResult,
    VerifierReward,
    WeightedRewardStack,
    build_default_reward_stack,
    build_reward_stack,
    validate_weights,
)

STOP = RewardContext(
    prompt="p", response="stop", reference="stop",
    metadata={"evidence_entities": ["stop"], "claimed_entities": ["go"], "latency_ms": 750},
)


def test_default_stack_is_aerorl_s():
    stack = build_default_reward_stack()
    assert [type(fn) for fn in stack.reward_functions] == [VerifierReward, GroundingReward, FormatReward, CostReward]
    assert stack.weights == {"verifier": 0.4, "grounding": 0.3, "format": 0.2, "cost": 0.1}
    scored = stack.evaluate(STOP)
    assert scored["components"] == {"verifier": 1.0, "grounding": -1.0, "format": 1.0, "cost": 0.5}
    assert scored["total_reward"] == 0.35  # 0.4 - 0.3 + 0.2 + 0.05
    assert set(scored["details"]) == {"verifier", "grounding", "format", "cost"}


def test_total_is_rounded_to_six_places():
    stack = WeightedRewardStack([lambda c: 1 / 3], weights={})
    assert stack.evaluate(STOP)["total_reward"] == 0.333333


def test_build_reward_stack_passes_settings_and_merges_weights():
    stack = build_reward_stack(
        weights={"verifier": 1.0, "cost": 0.0}, require_json=True, regex_pattern="^x", target_tokens=16,
        latency_budget_ms=200.0,
    )
    assert stack.weights == {"verifier": 1.0, "grounding": 0.3, "format": 0.2, "cost": 0.0}
    fmt, cost = stack.reward_functions[2], stack.reward_functions[3]
    assert (fmt.require_json, fmt.regex_pattern) == (True, "^x")
    assert (cost.target_tokens, cost.latency_budget_ms) == (16, 200.0)
    assert AERORL_REWARDS.weights["verifier"] == 0.4  # the defaults are not mutated


def test_verifier_mode_picks_the_metric_verifier():
    stack = build_reward_stack(verifier_mode="anls")
    assert isinstance(stack.reward_functions[0], AnlsVerifierReward)
    with pytest.raises(ValueError, match="unknown verifier mode 'bleu'"):
        build_reward_stack(verifier_mode="bleu")


def test_custom_float_function_counts_with_weight_one_under_its_name():
    def brevity(context: RewardContext) -> float:
        return 0.25

    stack = build_default_reward_stack()
    stack.reward_functions.append(brevity)
    scored = stack.evaluate(STOP)
    assert scored["components"]["brevity"] == 0.25
    assert scored["details"]["brevity"] == {}
    assert scored["total_reward"] == 0.6  # 0.35 + 1.0 * 0.25


def test_custom_component_returning_a_result_uses_the_result_name_and_weight():
    class Politeness:
        name = "politeness"

        def __call__(self, context: RewardContext) -> RewardResult:
            return RewardResult(name=self.name, score=-1.0, details={"why": "rude"})

    stack = WeightedRewardStack([Politeness()], weights={"politeness": 0.5})
    assert stack.evaluate(STOP) == {
        "total_reward": -0.5, "components": {"politeness": -1.0}, "details": {"politeness": {"why": "rude"}},
    }


def test_components_sharing_a_name_both_count_and_the_last_is_reported():
    stack = WeightedRewardStack([lambda c: RewardResult("x", 1.0), lambda c: RewardResult("x", 0.5)], {"x": 2.0})
    scored = stack.evaluate(STOP)
    assert scored["components"] == {"x": 0.5}
    assert scored["total_reward"] == 3.0


def test_registry_names_the_four_components():
    assert dict(REWARD_COMPONENTS) == {
        "verifier": VerifierReward, "grounding": GroundingReward, "format": FormatReward, "cost": CostReward,
    }


def test_validate_weights_returns_floats():
    assert validate_weights({"verifier": 1, "cost": 0.5}) == {"verifier": 1.0, "cost": 0.5}
    assert validate_weights({}) == {}


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"verifer": 1.0}, "unknown reward component 'verifer'"),
        ({"cost": math.nan}, "weight for 'cost' must be a finite number"),
        ({"cost": math.inf}, "weight for 'cost' must be a finite number"),
        ({"format": "0.5"}, "weight for 'format' must be a finite number, got '0.5'"),
        ({"grounding": True}, "weight for 'grounding' must be a finite number, got True"),
        ({"grounding": None}, "weight for 'grounding' must be a finite number, got None"),
    ],
)
def test_validate_weights_names_the_offending_key(weights, message):
    with pytest.raises(ValueError, match=message):
        validate_weights(weights)
