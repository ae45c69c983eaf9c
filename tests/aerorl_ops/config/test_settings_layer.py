"""The settings layer: the shipped file states every default the dataclasses declare, each section
maps onto its dataclass, and the library's own defaults read from it."""

from __future__ import annotations

import tomllib
from dataclasses import fields

import pytest

from aerorl_ops.aerorl import AeroRLConfig
from aerorl_ops.aerorl_compat import AERORL_REWARDS
from aerorl_ops.config.benchmark import SECTIONS, BenchmarkConfig, ConfigError, parse_benchmark_config
from aerorl_ops.config.fields import default_of, setting_fields
from aerorl_ops.config.generation import GenerationSettings
from aerorl_ops.config.rewards import REWARD_COMPONENT_NAMES, RewardSettings
from aerorl_ops.config.training import TRAINING_DEFAULTS, TrainingSettings
from aerorl_ops.rewards.components import CostReward, FormatReward
from aerorl_ops.rewards.registry import REWARD_COMPONENTS, check_registry
from aerorl_ops.rewards.stack import build_default_reward_stack
from assets.project import BENCHMARK_CONFIG_PATH

SHIPPED = tomllib.loads(BENCHMARK_CONFIG_PATH.read_text())
MINIMAL = {"benchmark": {"batch_sizes": [1]}, "models": {"tiny-qwen2-vl": {"source": "embedded:tiny-qwen2-vl"}}}


EVERY_SETTING = [pytest.param(section, cls, field, id=f"{section}.{field.name}")
                 for section, cls in SECTIONS.items() for field in setting_fields(cls)]


@pytest.mark.parametrize(("section", "cls", "field"), EVERY_SETTING)
def test_the_shipped_file_states_each_default(section, cls, field):
    """The TOML value equals the dataclass default (a setting whose default is unset is left out)."""
    if field.name == "batch_sizes":  # required: the one setting with no default
        assert SHIPPED[section][field.name] == [1, 4, 8]
        return
    default = default_of(field)
    if default is None:
        assert field.name not in SHIPPED[section]
    else:
        assert SHIPPED[section][field.name] == default
        assert type(SHIPPED[section][field.name]) is type(default)


def test_a_file_with_only_the_required_keys_parses_to_the_dataclass_defaults():
    config = parse_benchmark_config(MINIMAL, path="bench.toml")
    assert (config.generation, config.rewards, config.training) == (
        GenerationSettings(), RewardSettings(), TrainingSettings())
    assert (config.seed, config.datasets) == tuple(
        default_of(f) for f in fields(BenchmarkConfig) if f.name in ("datasets", "seed"))


def test_every_section_maps_onto_its_dataclass():
    data = {**MINIMAL, "benchmark": {"batch_sizes": [2, 1, 2], "seed": 7},
            "generation": {"max_new_tokens": 5, "do_sample": True, "temperature": 0.5},
            "rewards": {"weights": {"cost": 0.5}, "target_tokens": 9},
            "training": {"steps": 3, "quant_bits": 8, "learning_rate": 1}}
    config = parse_benchmark_config(data, path="bench.toml")
    assert config.batch_sizes == (1, 2)
    assert config.generation == GenerationSettings(max_new_tokens=5, do_sample=True, temperature=0.5, seed=7)
    assert config.rewards == RewardSettings(weights={"cost": 0.5}, target_tokens=9)
    assert config.training == TrainingSettings(steps=3, quant_bits=8, learning_rate=1.0)
    assert isinstance(config.training.learning_rate, float)


@pytest.mark.parametrize(("data", "setting", "problem"), [
    ({"benchmark": {"batch_sizes": [1], "max_new_tokens": 8}}, "benchmark.max_new_tokens",
     "belongs in [generation] or [training] or [eval], not in [benchmark]"),
    ({"generation": {"seed": 3}}, "generation.seed", "belongs in [benchmark] or [training]"),
    ({"training": {"stepz": 3}}, "training",
     "has unknown keys ['stepz']; known keys: base_model, env, eval_env, train_split"),
    ({"reward": {"target_tokens": 3}}, "reward", "is not a table of this file"),
    ({"training": {"algorithm": "trpo"}}, "training.algorithm", "must be one of ('grpo', 'dr_grpo', 'rloo', "
     "'reinforce_pp', 'ppo', 'dapo', 'gspo'), got 'trpo'"),
    ({"training": {"quant_bits": 3}}, "training.quant_bits", "must be 4 (nf4), 8 (int8) or 16, got 3"),
    ({"training": {"kl_coef": -1}}, "training.kl_coef", "must be >= 0, got -1"),
    ({"training": {"group_size": 0}}, "training.group_size", "must be a positive integer, got 0"),
    ({"generation": {"top_p": 0}}, "generation.top_p", "must be in (0, 1], got 0"),
    ({"generation": {"do_sample": "yes"}}, "generation.do_sample", "must be true or false, got 'yes'"),
    ({"generation": []}, "generation", "must be a table"),
])
def test_a_bad_setting_names_the_file_and_the_setting(data, setting, problem):
    with pytest.raises(ConfigError) as raised:
        parse_benchmark_config({**MINIMAL, **data}, path="bench.toml")
    message = str(raised.value)
    assert message.startswith(f"bench.toml: setting '{setting}' ")
    assert problem in message


def test_the_benchmark_seed_seeds_generation():
    config = parse_benchmark_config({**MINIMAL, "benchmark": {"batch_sizes": [1], "seed": 5}})
    assert config.generation.seed == 5
    assert BenchmarkConfig(models=(), batch_sizes=(1,), seed=3).generation.seed == 3


def test_aerorl_s_config_defaults_read_from_the_settings_layer():
    settings = AeroRLConfig().settings()
    assert settings == TRAINING_DEFAULTS  # AeroRL's facade writes no training default of its own
    assert (AeroRLConfig().quant_ref_bits, settings.group_size, settings.learning_rate, settings.warmup_steps) == (
        8, 8, 1e-3, 30)
    assert (settings.total_steps, settings.episodes_after(31)) == (90, 30 * 32 + 16 * 8)


def test_aerorl_s_own_reward_defaults_are_kept_apart():
    """The replay CLI and the reward builders keep AeroRL's numbers; the project file has its own."""
    assert dict(AERORL_REWARDS.weights) == {"verifier": 0.4, "grounding": 0.3, "format": 0.2, "cost": 0.1}
    assert (AERORL_REWARDS.target_tokens, AERORL_REWARDS.latency_budget_ms, AERORL_REWARDS.require_json) == (
        128, 500.0, False)
    assert (CostReward().target_tokens, CostReward().latency_budget_ms) == (128, 500.0)
    assert FormatReward().require_json is False
    assert build_default_reward_stack().weights == dict(AERORL_REWARDS.weights)
    with pytest.raises(TypeError):
        AERORL_REWARDS.weights["cost"] = 1.0  # read-only


def test_reward_component_names_are_declared_once_and_the_registry_agrees():
    assert tuple(REWARD_COMPONENTS) == REWARD_COMPONENT_NAMES
    assert [cls().name for cls in REWARD_COMPONENTS.values()] == list(REWARD_COMPONENT_NAMES)
    assert set(RewardSettings().weights) == set(REWARD_COMPONENT_NAMES)
    with pytest.raises(RuntimeError, match="disagrees"):
        check_registry(REWARD_COMPONENTS, (*REWARD_COMPONENT_NAMES, "brevity"))
    swapped = {**REWARD_COMPONENTS, "cost": REWARD_COMPONENTS["format"]}
    with pytest.raises(RuntimeError, match="'cost' maps to FormatReward, which reports as 'format'"):
        check_registry(swapped, REWARD_COMPONENT_NAMES)
