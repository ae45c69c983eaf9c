"""AeroRL Pipeline's library: rows, models, generation, rewards, losses, training.

Public names are imported on first use (``_EXPORTS`` maps each to ``"module:attribute"``),
so ``import aerorl_ops`` loads nothing heavy; add new public names to the table.
"""

from importlib import import_module
from typing import Any

_EXPORTS: dict[str, str] = {
    "AeroRLConfig": "aerorl_ops.aerorl:AeroRLConfig",
    "AeroRLTrainer": "aerorl_ops.aerorl:AeroRLTrainer",
    "wrap_vlm_for_rl": "aerorl_ops.aerorl:wrap_vlm_for_rl",
    "create_quantized_reference_runtime": "aerorl_ops.aerorl:create_quantized_reference_runtime",
    "masked_cross_entropy_loss": "aerorl_ops.losses:masked_cross_entropy_loss",
    "RewardContext": "aerorl_ops.rewards.context:RewardContext",
    "RewardResult": "aerorl_ops.rewards.context:RewardResult",
    "RewardFunction": "aerorl_ops.rewards.context:RewardFunction",
    "VerifierReward": "aerorl_ops.rewards.components:VerifierReward",
    "GroundingReward": "aerorl_ops.rewards.components:GroundingReward",
    "FormatReward": "aerorl_ops.rewards.components:FormatReward",
    "CostReward": "aerorl_ops.rewards.components:CostReward",
    "AnlsVerifierReward": "aerorl_ops.rewards.verifiers:AnlsVerifierReward",
    "RelaxedAccuracyVerifierReward": "aerorl_ops.rewards.verifiers:RelaxedAccuracyVerifierReward",
    "VERIFIER_MODES": "aerorl_ops.rewards.verifiers:VERIFIER_MODES",
    "WeightedRewardStack": "aerorl_ops.rewards.stack:WeightedRewardStack",
    "build_default_reward_stack": "aerorl_ops.rewards.stack:build_default_reward_stack",
    "build_reward_stack": "aerorl_ops.rewards.stack:build_reward_stack",
    "REWARD_COMPONENTS": "aerorl_ops.rewards.registry:REWARD_COMPONENTS",
    "validate_weights": "aerorl_ops.rewards.registry:validate_weights",
    "evaluate_records": "aerorl_ops.rewards.evaluate:evaluate_records",
    "evaluate_table": "aerorl_ops.rewards.columnar.evaluate:evaluate_table",
    "read_replay": "aerorl_ops.replay.reader:read_replay",
    "iter_replay_records": "aerorl_ops.replay.reader:iter_replay_records",
    "ReplayFormatError": "aerorl_ops.rewards.replay_lines:ReplayFormatError",
    "anls": "aerorl_ops.metrics:anls",
    "relaxed_accuracy": "aerorl_ops.metrics:relaxed_accuracy",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name, attribute = target.split(":")
    value = getattr(import_module(module_name), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
