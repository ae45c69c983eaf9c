"""``rl_run``'s run config returns checked ``TrainingSettings``, like ``eval_run``'s returns
``EvalSettings``; the run fields stay apart, and the run id is a hash of the settings as before."""

import dataclasses

import pytest

from aerorl_ops.config.fields import ConfigError
from aerorl_ops.config.training import TRAINING_DEFAULTS, TrainingSettings
from assets.training.rl_run import RUN_FIELDS, training_config_class

TrainingConfig = training_config_class(TRAINING_DEFAULTS)


def test_the_run_config_returns_the_checked_settings_without_the_run_fields():
    config = TrainingConfig(steps=3, quant_bits=4, run_name="mine", progress_bar=True)
    settings = config.settings()
    assert settings == dataclasses.replace(TRAINING_DEFAULTS, steps=3, quant_bits=4)
    assert not set(RUN_FIELDS) & {f.name for f in dataclasses.fields(TrainingSettings)}


@pytest.mark.parametrize(("values", "message"), [
    ({"quant_bits": 3}, "rl_run config: setting 'quant_bits' must be 4 (nf4), 8 (int8) or 16, got 3"),
    ({"kl_coef": -0.5}, "rl_run config: setting 'kl_coef' must be >= 0, got -0.5"),
    ({"clip_low": 1.5}, "rl_run config: setting 'clip_low' must be in (0, 1), got 1.5"),
    ({"group_size": 1}, "rl_run config: group_size must be >= 2 for grpo"),
    ({"reference": "lora_base"}, "rl_run config: reference must be 'quantized' when lora_rank = 0"),
    ({"run_name": "../up"}, "rl_run config run_name '../up' must be letters"),
])
def test_a_bad_value_is_a_config_error_naming_the_field(values, message):
    with pytest.raises(ConfigError) as raised:
        TrainingConfig(**values).settings()
    assert str(raised.value).startswith(message)


def test_the_run_id_is_the_settings_hash_it_was():
    """The same settings keep the id they had before the settings became one object (runs resume)."""
    assert (TrainingConfig().run_id(), TrainingConfig(steps=3).run_id()) == (
        "rl-grpo-s0-0c0205eb53", "rl-grpo-s0-44f21cb681")  # the ids these settings had before (HEAD e7d69dd)
    assert TrainingConfig(progress_bar=True, nproc_per_node=2).run_id() == TrainingConfig().run_id()
    assert TrainingConfig(steps=3).run_id() != TrainingConfig().run_id()
