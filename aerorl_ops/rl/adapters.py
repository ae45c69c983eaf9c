"""Which trainer backend runs the RL steps (descriptive fields AeroRL users read)."""

from __future__ import annotations

import importlib.util
from dataclasses import asdict, dataclass


@dataclass(frozen=True, slots=True)
class TrainerAdapter:
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
    return TrainerAdapter(preferred, installed,
                          f"{preferred} {'installed' if installed else 'not installed'}; steps run on the torch trainer")
