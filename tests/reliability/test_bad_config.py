"""Reliability: a bad setting fails at config validation, before any model loads, naming the setting.

Covered: the benchmark TOML (``load_benchmark_config`` / ``parse_benchmark_config``), ``plan_bench``
(what ``aerorl bench`` runs first), the training settings (AeroRL's ``AeroRLConfig.settings`` and
``TrainingConfig.settings``), and the same mistakes made through Dagster run config of the real
jobs. Every test runs with model loading replaced by a recorder and asserts it was never called.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from model_loads import refuse_model_loads

from aerorl_ops.aerorl import AeroRLConfig
from aerorl_ops.config.benchmark import ConfigError, load_benchmark_config, parse_benchmark_config
from aerorl_ops.config.training import TrainingSettings
from aerorl_pipeline.bench import plan_bench
from aerorl_pipeline.definitions import build_definitions
from assets.training.rl_run import training_config_class

TrainingConfig = training_config_class(TrainingSettings())  # rl_run's run config, dataclass defaults
rl_run = build_definitions().get_assets_def("rl_run")

GOOD_TOML = """
[benchmark]
batch_sizes = [1, 4]

[models.tiny-qwen2-vl]
source = "embedded:tiny-qwen2-vl"

[rewards]
weights = { verifier = 0.4, grounding = 0.3, format = 0.2, cost = 0.1 }
"""


@pytest.fixture(autouse=True)
def model_loads(monkeypatch) -> list[str]:
    """Every way this project loads or builds a model, replaced by a recorder that refuses."""
    calls = refuse_model_loads(monkeypatch)
    yield calls
    assert calls == [], f"a model load happened: {calls}"


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "benchmark.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("old", "new", "setting", "problem"), [
    ('[models.tiny-qwen2-vl]', '[models."Tiny Qwen"]', "models.Tiny Qwen", "is not a safe partition key"),
    ('source = "embedded:tiny-qwen2-vl"', 'source = "./checkpoints/step-9"', "models.tiny-qwen2-vl.source",
     "which is not a directory"),
    ("batch_sizes = [1, 4]", "batch_sizes = [1, 0]", "benchmark.batch_sizes", "must be a positive integer, got 0"),
    ("batch_sizes = [1, 4]", "batch_sizes = [-4]", "benchmark.batch_sizes", "must be a positive integer, got -4"),
    ("verifier = 0.4", 'verifier = "high"', "rewards.weights.verifier", "must be a finite number, got 'high'"),
    ("verifier = 0.4", "verifier = nan", "rewards.weights.verifier", "must be a finite number, got nan"),
    ("verifier = 0.4", "verifer = 0.4", "rewards.weights.verifer", "names no reward component"),
])
def test_bad_benchmark_file_is_refused_naming_file_and_setting(tmp_path, old, new, setting, problem):
    assert old in GOOD_TOML
    path = write_config(tmp_path, GOOD_TOML.replace(old, new))
    with pytest.raises(ConfigError) as raised:
        load_benchmark_config(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: setting '{setting}'")
    assert problem in message


def test_the_good_file_parses(tmp_path):
    config = load_benchmark_config(write_config(tmp_path, GOOD_TOML))
    assert (config.model_keys, config.batch_sizes) == (("tiny-qwen2-vl",), (1, 4))


def test_unknown_model_key_is_named_with_the_configured_ones():
    config = parse_benchmark_config({"benchmark": {"batch_sizes": [1]},
                                     "models": {"tiny-qwen2-vl": {"source": "embedded:tiny-qwen2-vl"}}},
                                    path="bench.toml")
    expected = r"^bench\.toml: unknown model key 'qwen-72b'; configured keys: tiny-qwen2-vl$"
    with pytest.raises(ConfigError, match=expected):
        config.model("qwen-72b")


@pytest.mark.parametrize(("models", "batch_sizes", "named"), [
    (["qwen-72b"], [], "unknown model key 'qwen-72b'"),
    (["tiny-qwen2-vl"], [0], "batch sizes [0] are not configured"),
    (["tiny-qwen2-vl"], [4, -1], "batch sizes [-1] are not configured"),
])
def test_plan_bench_refuses_before_anything_runs(models, batch_sizes, named):
    with pytest.raises(ConfigError) as raised:
        plan_bench(models, batch_sizes)
    assert named in str(raised.value)
    assert "config/benchmark.toml" in str(raised.value)


@pytest.mark.parametrize(("config", "named"), [
    (AeroRLConfig(quant_ref_bits=3), "AeroRLConfig: setting 'quant_ref_bits' must be 4 (nf4), 8 (int8) or 16, got 3"),
    (AeroRLConfig(training={"group_size": 1}), "AeroRLConfig: group_size must be >= 2 for grpo"),
    (AeroRLConfig(training={"kl_coef": -0.01}), "setting \"training['kl_coef']\" must be >= 0, got -0.01"),
    (AeroRLConfig(training={"kl_coef": float("nan")}),
     "setting \"training['kl_coef']\" must be a finite number, got nan"),
    (AeroRLConfig(training={"algorithm": "trpo"}),
     "must be one of ('grpo', 'dr_grpo', 'rloo', 'reinforce_pp', 'ppo', 'dapo', 'gspo'), got 'trpo'"),
])
def test_aerorl_config_names_the_field(config, named):
    with pytest.raises(ConfigError) as raised:
        config.settings()
    assert named in str(raised.value)


def test_group_size_one_is_fine_without_groups():
    assert AeroRLConfig(training={"algorithm": "reinforce_pp", "group_size": 1}).settings().group_size == 1


@pytest.mark.parametrize(("settings", "named"), [
    ({"quant_bits": 3}, "rl_run config: setting 'quant_bits' must be 4 (nf4), 8 (int8) or 16, got 3"),
    ({"group_size": 1}, "rl_run config: group_size must be >= 2 for grpo"),
    ({"kl_coef": -0.5}, "rl_run config: setting 'kl_coef' must be >= 0, got -0.5"),
])
def test_training_config_settings_refuses(settings, named):
    with pytest.raises(ConfigError) as raised:
        TrainingConfig(**settings).settings()
    assert named in str(raised.value)


# --- the same mistakes through Dagster run config of the real assets ------------------------------------

def step_failure_message(result: dg.ExecuteInProcessResult) -> str:
    assert not result.success
    (failure,) = [event for event in result.all_events if event.is_step_failure]
    return f"{failure.step_key}: {failure.step_failure_data.error.to_string()}"


@pytest.mark.parametrize(("settings", "named"), [
    ({"quant_bits": 3}, "setting 'quant_bits' must be 4 (nf4), 8 (int8) or 16, got 3"),
    ({"group_size": 1}, "group_size must be >= 2 for grpo"),
    ({"kl_coef": -0.5}, "setting 'kl_coef' must be >= 0, got -0.5"),
    ({"base_model": "no-such-model"}, "base_model 'no-such-model' is neither a model key"),
    ({"base_model": "/nonexistent/checkpoint"}, "base_model '/nonexistent/checkpoint' is neither a model key"),
])
def test_rl_run_fails_on_bad_settings_before_loading(dagster_env, settings, named):
    result = dg.materialize([rl_run], resources=dagster_env.resources, instance=dagster_env.instance,
                            run_config={"ops": {"rl_run": {"config": settings}}}, raise_on_error=False)
    message = step_failure_message(result)
    assert message.startswith("rl_run: ")
    assert named in message


def test_benchmark_job_fails_on_bad_max_new_tokens_before_loading(bench):
    bench.materialize_rows("bad-config")
    result = bench.run_partition(4, "bad-config", raise_on_error=False, max_new_tokens=-1)
    message = step_failure_message(result)
    assert message.startswith("generations: ")
    assert "run config: generations: setting 'generation.max_new_tokens' must be a positive integer, got -1" in message
    assert bench.partition_counts("bad-config", 4) == {"generations": 0, "reward_scores": 0,
                                                      "benchmark_summary": 0}


def test_benchmark_job_refuses_an_unconfigured_batch_size(bench):
    job = bench.defs.resolve_job_def("benchmark")
    key = dg.MultiPartitionKey({"model": "tiny-qwen2-vl", "batch_size": "0"})
    with pytest.raises(Exception, match=r"0\|tiny-qwen2-vl"):
        job.execute_in_process(partition_key=key, instance=bench.env.instance)


def test_reward_weight_that_is_not_a_number_fails_run_config_validation(bench):
    job = bench.defs.resolve_job_def("benchmark")
    run_config = {"ops": {"reward_scores": {"config": {"weights": {"verifier": "high"}}}}}
    with pytest.raises(dg.DagsterInvalidConfigError, match=r"reward_scores.*weights"):
        job.execute_in_process(partition_key=dg.MultiPartitionKey({"model": "tiny-qwen2-vl", "batch_size": "4"}),
                               instance=bench.env.instance, run_config=run_config)


def test_unknown_reward_name_in_run_config_fails_before_generation(bench, model_loads):
    bench.materialize_rows("bad-reward")
    job = bench.defs.resolve_job_def("benchmark")
    run_config = {"ops": {"generations": {"config": {"max_new_tokens": 3}},
                          "reward_scores": {"config": {"weights": {"verifer": 1.0}}}}}
    with pytest.raises(dg.DagsterInvalidConfigError, match=r"verifer"):
        job.execute_in_process(partition_key=dg.MultiPartitionKey({"model": "tiny-qwen2-vl", "batch_size": "4"}),
                               instance=bench.env.instance, run_config=run_config, raise_on_error=False)
    assert list(model_loads) == []  # rejected at launch: no step ran, no model loaded
