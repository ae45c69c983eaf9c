"""Training presets: named sets of ``[training]`` overrides (``aerorl train --preset NAME``).

A preset names only what it changes; everything else keeps the config file's value, and
command-line flags override the preset.

* ``see``: a model that reads the image (docs/easy-vqa-training-recipes.md, E9 and E10). 800
  supervised steps at lr 1e-3, linear warm-up for 50 steps then cosine to 10%, with 75% colour/shape
  questions in each batch until step 500, then the natural mix; then 30 GRPO steps at lr 1e-4
  (at 1e-3 RL loses part of the colour reading). Yes/no questions are answerable from the text
  alone, so in the natural mix only about 4 in 32 questions make the model look; the curriculum
  is what makes colour rise within a few hundred steps. Evaluated every 100 steps.
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
        "warmup_lr_schedule": "cosine",
        "warmup_lr_warmup_steps": 50,
        "lr_min_ratio": 0.1,
        "curriculum": "500: colour,shape @ 0.75",
        "steps": 30,
        "learning_rate": 1e-4,
        "eval_interval": 100,
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
