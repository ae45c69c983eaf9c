"""A run's id: the ids of runs started before the ``Recipe`` (issue 32) stay theirs, so those runs resume."""

from __future__ import annotations

import pytest

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.rl.run.run_id import training_run_id

IDS_BEFORE_THE_RECIPE = [
    (TrainingSettings(), "rl-grpo-s0-0c0205eb53"),
    (TrainingSettings(algorithm="dapo"), "rl-dapo-s0-bf09bdf79a"),
    (TrainingSettings(algorithm="dapo", max_new_tokens=20, overlong_buffer=5, mask_truncated=True),
     "rl-dapo-s0-1938a7c692"),
    (TrainingSettings(algorithm="ppo"), "rl-ppo-s0-ef23035f77"),
    (TrainingSettings(algorithm="ppo", steps=10, kl_coef=0.01), "rl-ppo-s0-007a58e9e7"),
    (TrainingSettings(algorithm="gspo", lora_rank=8, reference="lora_base", policy_loss="gspo", clip_high=0.0005),
     "rl-gspo-s0-5f0b45aba9"),
    (TrainingSettings(nproc_per_node=2, grad_accumulation=2, sharding="fsdp2"), "rl-grpo-s0-eb63962cc9"),
]
"""Computed by the code before ``TrainingSettings.resolve`` (then ``resolved_settings`` of ``rl.core.algorithms``)."""


@pytest.mark.parametrize(("settings", "run_id"), IDS_BEFORE_THE_RECIPE)
def test_runs_started_before_the_recipe_keep_their_ids(settings, run_id):
    assert training_run_id(settings, settings.resolve()) == run_id


def test_a_setting_left_unset_is_not_the_same_run_as_its_default_set():
    """The id is of the settings as given: ppo_epochs unset is not ppo_epochs = 4, though both train 4 epochs
    (as before the Recipe); only ID_RESOLVED's settings enter resolved."""
    unset, given = TrainingSettings(algorithm="ppo"), TrainingSettings(algorithm="ppo", ppo_epochs=4)
    assert unset.resolve() == given.resolve()
    assert training_run_id(unset, unset.resolve()) != training_run_id(given, given.resolve())
    chosen = TrainingSettings(kl_coef=0.04, clip_low=0.2)  # grpo's defaults, set: ID_RESOLVED's enter resolved
    assert training_run_id(chosen, chosen.resolve()) == "rl-grpo-s0-0c0205eb53"


def test_a_name_is_the_id_and_a_recipe_is_not_the_settings_as_given():
    settings = TrainingSettings()
    assert training_run_id(settings, settings.resolve(), "my-run") == "my-run"
    with pytest.raises(TypeError, match="training_run_id takes the settings as given"):
        training_run_id(settings.resolve(), settings.resolve())
