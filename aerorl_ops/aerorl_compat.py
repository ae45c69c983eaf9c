"""AeroRL's reward defaults, kept so that AeroRL users find the numbers they know (AeroRL's API
itself, its config, trainer and runtimes, is the facade ``aerorl_ops.aerorl``).

``AERORL_REWARDS`` / ``AERORL_TOP_K``: AeroRL's own reward defaults (weights .4/.3/.2/.1, a
128-word and 500 ms cost budget, no JSON requirement, pass at 0.3, 3 best/worst examples). The
replay CLI, ``build_reward_stack()``, the components' defaults and ``evaluate_records`` keep them so
that AeroRL's numbers replay unchanged. The benchmark and training score with the project's
``RewardSettings`` instead (``config/benchmark.toml``).
"""

from __future__ import annotations

from types import MappingProxyType

from aerorl_ops.config.rewards import COST, FORMAT, GROUNDING, VERIFIER, RewardSettings

AERORL_REWARDS = RewardSettings(
    weights=MappingProxyType({VERIFIER: 0.4, GROUNDING: 0.3, FORMAT: 0.2, COST: 0.1}),  # read-only
    require_json=False,
    regex_pattern=None,
    target_tokens=128,
    latency_budget_ms=500.0,
    pass_threshold=0.3,
)
AERORL_TOP_K = 3
