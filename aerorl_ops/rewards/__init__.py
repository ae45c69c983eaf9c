"""The reward stack: AeroRL's components, weighted stack and replay scorers.

``evaluate_records`` scores record by record (the reference); ``evaluate_table`` scores
a replay table column by column with identical numbers (imported on first use, since it
brings in DuckDB).
"""

from typing import Any

from aerorl_ops.rewards.components import CostReward, FormatReward, GroundingReward, VerifierReward
from aerorl_ops.rewards.context import RewardCallable, RewardContext, RewardFunction, RewardResult
from aerorl_ops.rewards.evaluate import evaluate_records
from aerorl_ops.rewards.registry import REWARD_COMPONENTS, validate_weights
from aerorl_ops.rewards.stack import (
    WeightedRewardStack,
    build_default_reward_stack,
    build_reward_stack,
)
from aerorl_ops.rewards.verifiers import VERIFIER_MODES, AnlsVerifierReward, RelaxedAccuracyVerifierReward

__all__ = [
    "REWARD_COMPONENTS",
    "VERIFIER_MODES",
    "AnlsVerifierReward",
    "CostReward",
    "FormatReward",
    "GroundingReward",
    "RelaxedAccuracyVerifierReward",
    "RewardCallable",
    "RewardContext",
    "RewardFunction",
    "RewardResult",
    "VerifierReward",
    "WeightedRewardStack",
    "build_default_reward_stack",
    "build_reward_stack",
    "evaluate_records",
    "evaluate_table",
    "validate_weights",
]


def __getattr__(name: str) -> Any:
    if name == "evaluate_table":
        from aerorl_ops.rewards.columnar import evaluate_table

        return evaluate_table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
