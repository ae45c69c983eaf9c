"""AeroRL compatibility: the names and settings this project keeps only so AeroRL users find what
they know. Everything AeroRL-specific that does not change how this project trains lives here.

- ``trainer_backend`` (``TRAINER_BACKENDS``): AeroRL chooses a trainer backend; here ``auto`` and
  ``torch`` run this project's own torch trainer, and ``trl`` / ``verl`` are accepted and reported
  (with whether they are installed), but the steps still run on the torch trainer.
- ``zero_copy_kv``: AeroRL's descriptive flag, carried on ``AeroRLConfig`` and recorded with a run;
  it changes nothing here.
- ``AERORL_REWARDS`` / ``AERORL_TOP_K``: AeroRL's own reward defaults (weights .4/.3/.2/.1, a
  128-word and 500 ms cost budget, no JSON requirement, pass at 0.3, 3 best/worst examples). The
  replay CLI, ``build_reward_stack()``, the components' defaults and ``evaluate_records`` keep
  them so that AeroRL's numbers replay unchanged. The benchmark and training score with the
  project's ``RewardSettings`` instead (``config/benchmark.toml``).
"""

from __future__ import annotations

import importlib.util
from dataclasses import asdict, dataclass
from types import MappingProxyType

from aerorl_ops.config.rewards import COST, FORMAT, GROUNDING, VERIFIER, RewardSettings

TRAINER_BACKENDS = ("auto", "torch", "trl", "verl")

AERORL_REWARDS = RewardSettings(
    weights=MappingProxyType({VERIFIER: 0.4, GROUNDING: 0.3, FORMAT: 0.2, COST: 0.1}),  # read-only
    require_json=False,
    regex_pattern=None,
    target_tokens=128,
    latency_budget_ms=500.0,
    pass_threshold=0.3,
)
AERORL_TOP_K = 3


@dataclass(frozen=True, slots=True)
class TrainerAdapter:
    """Which trainer backend runs the RL steps (descriptive fields AeroRL users read)."""

    backend: str
    available: bool
    reason: str

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def resolve_trainer_backend(preferred: str = "auto") -> TrainerAdapter:
    """``auto``/``torch``: this project's torch trainer, always available. ``trl``/``verl`` are
    reported with whether they are installed; the steps still run on the torch trainer."""
    if preferred in ("auto", "torch"):
        return TrainerAdapter("torch", True, "aerorl_ops native torch trainer")
    installed = importlib.util.find_spec(preferred) is not None
    state = "installed" if installed else "not installed"
    return TrainerAdapter(preferred, installed, f"{preferred} {state}; steps run on the torch trainer")
