"""One default per setting: the shipped TOML, the settings dataclass, the Dagster run config and the
command-line flag agree on every field; and every command and the definitions follow ``--config``."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from aerorl_ops.config.benchmark import load_benchmark_config
from aerorl_ops.config.evaluation import EvalSettings
from aerorl_ops.config.fields import default_of, setting_fields
from aerorl_ops.config.generation import GenerationSettings
from aerorl_ops.config.rewards import REWARD_COMPONENT_NAMES, RewardSettings
from aerorl_ops.config.training import TrainingSettings
from aerorl_pipeline import cli
from aerorl_pipeline.definitions import build_definitions, defs
from aerorl_pipeline.settings_flags import config_path_from
from assets.evaluation.eval_run import RUN_FIELDS as EVAL_RUN_FIELDS
from assets.project import BENCHMARK_CONFIG_PATH, CONFIG_ENV
from assets.training.rl_run import RUN_FIELDS, training_config_class

SHIPPED_TOML = tomllib.loads(BENCHMARK_CONFIG_PATH.read_text())
SHIPPED = load_benchmark_config(BENCHMARK_CONFIG_PATH)
DEFS = build_definitions(BENCHMARK_CONFIG_PATH)
PARSER = cli.build_parser(SHIPPED)
CLI = {command: PARSER.parse_args([command]) for command in ("bench", "train", "eval")}

# (TOML table, settings dataclass, asset whose run config carries it, command whose flags carry it)
SURFACES = [
    ("generation", GenerationSettings, "generations", "bench"),
    ("rewards", RewardSettings, "reward_scores", "bench"),
    ("training", TrainingSettings, "rl_run", "train"),
    ("eval", EvalSettings, "eval_run", "eval"),
]
FILE_SETTINGS = [pytest.param(section, cls, asset, command, field, id=f"{section}.{field.name}")
                 for section, cls, asset, command in SURFACES for field in setting_fields(cls)]
NO_FLAG = {"weights"}  # a table: set in the file (or the run config), not on the command line


def dagster_fields(defs, asset: str) -> dict:
    return defs.get_assets_def(asset).op.config_schema.config_type.fields


@pytest.mark.parametrize(("section", "cls", "asset", "command", "field"), FILE_SETTINGS)
def test_toml_dataclass_dagster_and_cli_defaults_are_equal(section, cls, asset, command, field):
    default = default_of(field)
    toml = SHIPPED_TOML[section].get(field.name)  # a setting whose default is unset is left out of the file
    dagster = dagster_fields(DEFS, asset)[field.name].default_value
    if field.name == "weights":  # one run-config field per component
        weights = dagster_fields(DEFS, asset)["weights"].config_type.fields
        dagster = {name: weights[name].default_value for name in REWARD_COMPONENT_NAMES}
    assert toml == default
    assert dagster == default
    assert getattr(getattr(SHIPPED, section), field.name) == default
    if field.name in NO_FLAG:
        assert not hasattr(CLI[command], field.name)
    else:
        assert getattr(CLI[command], field.name) == default


@pytest.mark.parametrize(("section", "cls", "asset", "command"), SURFACES)
def test_the_run_config_and_the_flags_have_every_setting_and_nothing_else(section, cls, asset, command):
    settings = {field.name for field in setting_fields(cls)}
    run_only = {"generations": {"limit"}, "reward_scores": set(), "rl_run": set(RUN_FIELDS),
                "eval_run": set(EVAL_RUN_FIELDS)}[asset]
    assert set(dagster_fields(DEFS, asset)) == settings | run_only
    flags = getattr(CLI[command], f"{section.removesuffix('s')}_flags")  # generation_, reward_, training_flags
    assert set(flags) == settings - NO_FLAG
    unset_by_default = {field.name for field in setting_fields(cls) if default_of(field) is None}
    assert set(SHIPPED_TOML[section]) == settings - unset_by_default


NIGHTLY = """
[benchmark]
batch_sizes = [2, 16]
seed = 3

[models.tiny-a]
source = "embedded:tiny-qwen2-vl"

[models.tiny-b]
source = "embedded:tiny-qwen2-vl"

[generation]
max_new_tokens = 7

[rewards]
weights = { verifier = 1.0 }
pass_threshold = 0.5

[training]
steps = 5
quant_bits = 8

[eval]
model = "tiny-b"
n = 20
"""


@pytest.fixture
def nightly(tmp_path: Path) -> Path:
    path = tmp_path / "nightly.toml"
    path.write_text(NIGHTLY)
    return path


def test_definitions_built_from_another_file_follow_it(nightly):
    other = build_definitions(nightly)
    keys = other.resolve_job_def("benchmark").partitions_def.get_partition_keys()
    assert sorted(str(key) for key in keys) == ["16|tiny-a", "16|tiny-b", "2|tiny-a", "2|tiny-b"]
    assert dagster_fields(other, "generations")["max_new_tokens"].default_value == 7
    assert dagster_fields(other, "reward_scores")["pass_threshold"].default_value == 0.5
    weights = dagster_fields(other, "reward_scores")["weights"].config_type.fields
    assert {name: weights[name].default_value for name in REWARD_COMPONENT_NAMES} == {
        "verifier": 1.0, "grounding": None, "format": None, "cost": None}
    training = dagster_fields(other, "rl_run")
    assert (training["steps"].default_value, training["quant_bits"].default_value) == (5, 8)
    assert training["group_size"].default_value == TrainingSettings().group_size
    # and the shipped definitions are untouched by it
    assert dagster_fields(DEFS, "generations")["max_new_tokens"].default_value == SHIPPED.generation.max_new_tokens


def test_the_dagster_loader_reads_the_file_named_by_the_environment(nightly, monkeypatch):
    monkeypatch.setenv(CONFIG_ENV, str(nightly))
    assert dagster_fields(defs(), "rl_run")["steps"].default_value == 5
    monkeypatch.delenv(CONFIG_ENV)
    assert dagster_fields(defs(), "rl_run")["steps"].default_value == SHIPPED.training.steps


@pytest.mark.parametrize("command", ["bench", "train", "eval", "dev"])
def test_every_command_takes_config_and_its_flags_default_to_that_file(nightly, command):
    argv = [command, "--config", str(nightly)]
    assert config_path_from(argv, BENCHMARK_CONFIG_PATH) == nightly.resolve()
    assert config_path_from([command], BENCHMARK_CONFIG_PATH) == BENCHMARK_CONFIG_PATH
    args = cli.build_parser(load_benchmark_config(nightly)).parse_args(argv)
    assert args.config == nightly
    if command == "bench":
        assert (args.max_new_tokens, args.pass_threshold, args.target_tokens) == (7, 0.5, 24)
        assert args.settings.model_keys == ("tiny-a", "tiny-b")
    if command == "train":
        assert (args.steps, args.quant_bits, args.group_size) == (5, 8, 8)
        assert cli.build_parser(load_benchmark_config(nightly)).parse_args([*argv, "--steps", "2"]).steps == 2
    if command == "eval":
        assert (args.n, args.model, args.samples) == (20, "tiny-b", 8)
        assert cli.build_parser(load_benchmark_config(nightly)).parse_args([*argv, "--n", "3"]).n == 3


def test_aerorl_dev_hands_the_config_to_the_definitions_loader(nightly, monkeypatch):
    launched = []
    monkeypatch.setattr(os, "execv", lambda path, command: launched.append((command, os.environ[CONFIG_ENV])))
    monkeypatch.setenv("DAGSTER_HOME", str(nightly.parent / "dagster_home"))
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    assert cli.main(["dev", "--config", str(nightly)]) == 0
    ((command, named),) = launched
    assert command[command.index("-m", 2) + 1] == "aerorl_pipeline.definitions"
    assert named == str(nightly.resolve())


def test_a_bad_config_file_is_a_configuration_error(tmp_path, capsys):
    broken = tmp_path / "broken.toml"
    broken.write_text('[benchmark]\nbatch_sizes = [1]\nmax_new_tokens = 8\n'
                      '[models.m]\nsource = "embedded:tiny-qwen2-vl"\n')
    assert cli.main(["train", "--config", str(broken), "--steps", "1"]) == 2
    assert "setting 'benchmark.max_new_tokens' belongs in [generation] or [training]" in capsys.readouterr().err


def test_the_default_training_run_id_is_stable_so_reruns_resume():
    """The run id hashes the training settings, so a rerun with the same settings finds its checkpoints.
    (Issues 11, 12 and 15 (rollout_backend) changed the training settings, hence these ids; a change of them
    must be deliberate.) The rollout backend changes the sampled replies, so it is part of the id."""
    TrainingConfig = training_config_class(SHIPPED.training)
    assert TrainingConfig().run_id() == "rl-grpo-s0-0c0205eb53"
    assert TrainingConfig(steps=3, learning_rate=1e-2).run_id() == "rl-grpo-s0-b07eabec31"
    assert TrainingConfig(rollout_backend="vllm").run_id() == "rl-grpo-s0-0530b9d318"
    # a setting added since (run_id.ID_WHEN_SET) changes the id only when set away from its default
    assert TrainingConfig(freeze_projector=False).run_id() == "rl-grpo-s0-0c0205eb53"
    assert TrainingConfig(freeze_projector=True).run_id() not in ("rl-grpo-s0-0c0205eb53", "")
