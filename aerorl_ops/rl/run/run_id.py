"""A training run's id: its ``run_name``, else a stable digest of its settings (the same settings resume).

Kept apart from the run itself so that a command can find a run's rows (has it finished?) without
importing the trainer.
"""

from __future__ import annotations

import hashlib
import json

from aerorl_ops.config.fields import setting_fields
from aerorl_ops.config.training import LAUNCH_SETTINGS, TRAINING_DEFAULTS, Recipe, TrainingSettings

ID_WHEN_SET = ("freeze_projector", "policy_loss", "tau_pos", "tau_neg", "dynamic_sampling", "max_sampling_rounds",
               "overlong_buffer", "overlong_penalty_factor", "mask_truncated", "micro_batch_tokens",
               "rollout_mode", "rollout_is", "rollout_is_cap", "mixed_precision")
"""Settings added since the run-id format: each enters the id only when set away from its default, so
adding a setting leaves the id (and so the resume) of every run made before it as it was."""
ID_RESOLVED = ("kl_coef", "loss_agg_mode", "clip_low", "clip_high")
"""Settings whose fixed default became the algorithm's: the id takes their resolved value, as it took
the fixed default before (the run's ``Recipe``: ``TrainingSettings.resolve``)."""


def training_run_id(settings: TrainingSettings, recipe: Recipe, run_name: str = "") -> str:
    """``run_name`` when set, else a stable id of the settings as given (same settings: same run,
    resumed); the launch settings (``LAUNCH_SETTINGS``: how many ranks) are not part of it, nor
    ``ID_WHEN_SET``'s at their defaults; ``ID_RESOLVED``'s enter as ``recipe`` has them (``recipe``:
    ``settings.resolve()``). Settings left unset enter unset: a ``Recipe`` is not the settings as given
    (a TypeError)."""
    if isinstance(settings, Recipe):
        raise TypeError("training_run_id takes the settings as given (a TrainingSettings, unset settings "
                        "unset) and their Recipe, got a Recipe as the settings")
    if run_name:
        return run_name
    values = {f.name: getattr(recipe if f.name in ID_RESOLVED else settings, f.name)
              for f in setting_fields(TrainingSettings)
              if f.name not in LAUNCH_SETTINGS
              and not (f.name in ID_WHEN_SET and getattr(settings, f.name) == getattr(TRAINING_DEFAULTS, f.name))}
    digest = hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:10]
    return f"rl-{settings.algorithm}-s{settings.seed}-{digest}"
