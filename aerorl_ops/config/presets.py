"""Training presets: named sets of ``[training]`` overrides (``aerorl train --preset NAME``).

A preset names only what it changes; everything else keeps the config file's value, and
command-line flags override the preset.

* ``see``: a model that reads the image. Supervised training with 75% colour/shape questions in
  each batch until step 500, then the natural mix to step 800 (lr 1e-3), then a short GRPO phase.
  Yes/no questions are answerable from the text alone, so in the natural mix only about 4 in 32
  questions make the model look; the curriculum is what makes colour rise within a few hundred steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from types import MappingProxyType

from aerorl_ops.config.training import TrainingSettings

PRESETS: Mapping[str, Mapping[str, object]] = MappingProxyType({
    "see": MappingProxyType({
        "warmup_steps": 800,
        "warmup_learning_rate": 1e-3,
        "focus_types": "colour,shape",
        "focus_share": 0.75,
        "focus_until": 500,
        "steps": 20,
        "eval_interval": 10,
    }),
})


def preset_overrides(name: str) -> dict[str, object]:
    """The overrides of preset ``name``; an unknown name is an error listing the known ones."""
    try:
        overrides = dict(PRESETS[name])
    except KeyError:
        raise ValueError(f"unknown training preset {name!r}; known presets: {', '.join(sorted(PRESETS))}") from None
    known = {f.name for f in fields(TrainingSettings)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"training preset {name!r} sets unknown settings {unknown}")
    return overrides
