"""The rules across training settings, written once in ``config.training``: the file, the command line
(``TrainingSettings.check_rules``) and a run's config (``TrainingRunConfig.settings``) hold to the same ones; a flag
is checked by its setting's own check, named as the flag; a curriculum's question types resolve against
the environment."""

from __future__ import annotations

import dataclasses
import re

import pytest

from aerorl_ops.aerorl import AeroRLConfig
from aerorl_ops.config.benchmark import parse_benchmark_config
from aerorl_ops.config.fields import ConfigError, checked
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.rl.run.inputs import training_environments

GROUP_RULE = ("group_size must be >= 2 for grpo/dr_grpo/rloo/dapo/gspo (advantages are relative within a group), "
              ">= 1 otherwise, got 1")


@pytest.mark.parametrize(("changes", "problem"), [
    ({"group_size": 1}, GROUP_RULE),
    ({"algorithm": "dr_grpo", "group_size": 1}, GROUP_RULE),
    ({"reference": "lora_base"}, "reference must be 'quantized' when lora_rank = 0 ('lora_base' is the LoRA policy "
     "with its adapters disabled: set lora_rank > 0), got 'lora_base'"),
    ({"vllm_sleep_mode": True}, "vllm_sleep_mode = true puts the vLLM rollout engine to sleep during the update, but "
     "rollout_backend = 'hf' has none: set rollout_backend = \"vllm\", or vllm_sleep_mode = false"),
    ({"cpu_offload": True}, 'cpu_offload = true needs sharding = "fsdp2" (it offloads the shards), got sharding = '
     "'none'"),
    ({"sharding": "fsdp2", "nproc_per_node": 2, "grad_accumulation": 2, "micro_batch_tokens": 200},
     'sharding = "fsdp2" cannot cut micro-batches by tokens yet (micro_batch_tokens = 200: the ranks would run '
     "different numbers of forward passes"),
    ({"sharding": "fsdp2", "nnodes": 2, "grad_accumulation": 2, "micro_batch_tokens": 200},  # ranks on 2 nodes
     'sharding = "fsdp2" cannot cut micro-batches by tokens yet'),
    ({"rollout_mode": "one_step_off", "nnodes": 2}, 'rollout_mode = "one_step_off" needs nnodes = 1, got 2'),
])
def test_check_rules_names_where_and_the_rule(changes, problem):
    settings = dataclasses.replace(TrainingSettings(), **changes)
    with pytest.raises(ConfigError) as raised:
        settings.check_rules("aerorl train")
    assert str(raised.value).startswith(f"aerorl train: {problem}")


@pytest.mark.parametrize("changes", [
    {}, {"algorithm": "reinforce_pp", "group_size": 1}, {"reference": "lora_base", "lora_rank": 4},
    {"rollout_backend": "vllm"},
    {"rollout_backend": "vllm", "nproc_per_node": 2, "grad_accumulation": 2, "vllm_sleep_mode": True},  # per rank
    {"rollout_backend": "vllm", "nnodes": 2, "sharding": "fsdp2", "grad_accumulation": 2},
    {"sharding": "fsdp2", "nproc_per_node": 2, "cpu_offload": True, "gradient_checkpointing": True, "lora_rank": 4,
     "reference": "lora_base", "algorithm": "ppo", "freeze_vision_tower": True, "quant_bits": 4},
    {"sharding": "fsdp2", "micro_batch_tokens": 200},  # one process: nothing is sharded
    {"nnodes": 2, "nproc_per_node": 2, "sharding": "fsdp2", "grad_accumulation": 4},
])
def test_settings_that_keep_the_rules_pass(changes):
    settings = dataclasses.replace(TrainingSettings(), **changes)
    assert settings.check_rules("aerorl train") is settings


def test_aerorl_s_config_holds_to_the_same_group_rule():
    with pytest.raises(ConfigError, match=f"^{re.escape(f'AeroRLConfig: {GROUP_RULE}')}$"):
        AeroRLConfig(training={"group_size": 1}).settings()


def test_the_file_is_held_to_the_rules_naming_the_file():
    data = {"benchmark": {"batch_sizes": [1]}, "models": {"tiny": {"source": "embedded:tiny-qwen2-vl"}},
            "training": {"group_size": 1}}
    with pytest.raises(ConfigError, match=f"^{re.escape(f'bench.toml: {GROUP_RULE}')}$"):
        parse_benchmark_config(data, "bench.toml")


def test_checked_names_each_setting_as_told():
    values = {"learning_rate": -0.001}
    with pytest.raises(ConfigError, match=r"^aerorl train: setting '--learning-rate' must be > 0, got -0.001$"):
        checked(TrainingSettings, "aerorl train", "training", values, named=lambda n: "--" + n.replace("_", "-"))
    with pytest.raises(ConfigError, match=r"^f\.toml: setting 'training\.learning_rate' must be > 0, got -0.001$"):
        checked(TrainingSettings, "f.toml", "training", values)


def test_a_curriculum_type_the_environment_lacks_is_refused_listing_its_types():
    settings = TrainingSettings(curriculum="50: colour,shap @ 0.75", train_limit=64, eval_size=8)
    with pytest.raises(ConfigError) as raised:
        training_environments(settings, 0)
    assert str(raised.value) == ("training curriculum stage 1 (until step 50) names question types ['shap'] that "
                                 "environment 'easy_vqa' does not have; its types: colour, shape, yes_no")


def test_a_curriculum_of_known_types_builds_the_environments():
    train, held_out = training_environments(TrainingSettings(curriculum="50: colour,shape @ 0.75",
                                                             train_limit=64, eval_size=8), 0)
    assert (len(train), len(held_out)) == (64, 8)


def test_the_ranks_in_all_are_the_nodes_times_their_processes():
    assert (TrainingSettings().world_size, TrainingSettings(nnodes=3, nproc_per_node=2).world_size) == (1, 6)


def test_a_kubernetes_launch_of_the_nodes_needs_an_image():
    data = {"benchmark": {"batch_sizes": [1]}, "models": {"tiny": {"source": "embedded:tiny-qwen2-vl"}},
            "training_launch": {"launcher": "k8s", "namespace": "train"}}
    with pytest.raises(ConfigError, match=r'^bench\.toml: \[training_launch\] launcher = "k8s" needs image'):
        parse_benchmark_config(data, "bench.toml")
    data["training_launch"]["image"] = "reg/aerorl:1"
    launch = parse_benchmark_config(data, "bench.toml").training_launch
    assert (launch.launcher, launch.namespace, launch.image, launch.port) == ("k8s", "train", "reg/aerorl:1", 29500)
