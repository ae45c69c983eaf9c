"""Presets: named sets of ``[training]`` overrides (``aerorl train --preset NAME``), and the quick
``[eval]`` (``aerorl eval --quick``).

A preset names only what it changes; everything else keeps the config file's value, and
command-line flags override the preset.

* ``quick``: the whole training path in about a minute on 2 idle cores (docs/measured.md): 10
  supervised warm-up steps, 10 GRPO steps of 8 prompts x 4 replies, 100 held-out questions, no
  supervised control and no sampled evaluations. It shows the run, its tables and a checkpoint,
  not learning: the full run (``aerorl train``) is the one whose accuracy means something.

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

from aerorl_ops.config.evaluation import EvalSettings
from aerorl_ops.config.training import TrainingSettings

PRESETS: Mapping[str, Mapping[str, object]] = MappingProxyType({
    "quick": MappingProxyType({
        "warmup_steps": 10,
        "steps": 10,
        "prompts_per_step": 8,
        "group_size": 4,
        "eval_size": 100,
        "eval_interval": 10,
        "sampled_eval_size": 0,
        "control": False,
        "checkpoint_interval": 10,
    }),
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


QUICK_EVAL: Mapping[str, object] = MappingProxyType({"n": 100, "samples": 4, "k": 4, "resamples": 2000})
"""``aerorl eval --quick``: 100 questions, 4 samples each at temperature 1 (pass@4), in about a minute on 2
idle cores; the full eval (500 questions, pass@8) is the one to compare models by."""


def preset_overrides(name: str) -> dict[str, object]:
    """The overrides of preset ``name``; an unknown name is an error listing the known ones."""
    try:
        overrides = dict(PRESETS[name])
    except KeyError:
        raise ValueError(f"unknown training preset {name!r}; known presets: {', '.join(sorted(PRESETS))}") from None
    _check_names(f"training preset {name!r}", overrides, TrainingSettings)
    return overrides


def quick_eval_overrides() -> dict[str, object]:
    """The settings ``aerorl eval --quick`` changes."""
    overrides = dict(QUICK_EVAL)
    _check_names("the quick eval", overrides, EvalSettings)
    return overrides


def _check_names(what: str, overrides: Mapping[str, object], settings_type: type) -> None:
    unknown = sorted(set(overrides) - {f.name for f in fields(settings_type)})
    if unknown:
        raise ValueError(f"{what} sets unknown settings {unknown}")
