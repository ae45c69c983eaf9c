"""``[rewards.judge]`` and ``[datasets.<name>] judge``: parsed into ``JudgeSettings``, every bad value named."""

from __future__ import annotations

from pathlib import Path

import pytest

from aerorl_ops.config.benchmark import ConfigError, load_benchmark_config, parse_benchmark_config
from aerorl_ops.config.judge import DEFAULT_JUDGE_TEMPLATE, JudgeSettings


def config_data(judge: dict | None = None, **datasets) -> dict:
    data = {"benchmark": {"batch_sizes": [1]},
            "models": {"tiny-qwen2-vl": {"source": "embedded:tiny-qwen2-vl"}},
            "rewards": {} if judge is None else {"judge": judge}}
    if datasets:
        data["datasets"] = datasets
    return data


def test_a_judge_table_parses_with_defaults_for_what_it_leaves_out():
    config = parse_benchmark_config(config_data({"model": "tiny-qwen2-vl", "weight": 0.25, "failure_score": -1}))
    assert config.rewards.judge == JudgeSettings(model="tiny-qwen2-vl", weight=0.25, failure_score=-1.0)
    assert config.rewards.judge.template == DEFAULT_JUDGE_TEMPLATE
    assert config.rewards.weights == {"verifier": 0.4, "grounding": 0.3, "format": 0.2, "cost": 0.1}


def test_no_judge_table_means_no_judge():
    assert parse_benchmark_config(config_data()).rewards.judge is None


@pytest.mark.parametrize(("judge", "message"), [
    ({"model": "gpt-judge"}, r"'rewards\.judge\.model' names model 'gpt-judge', which is not a \[models\] key; "
                             r"configured: tiny-qwen2-vl"),
    ({"weight": 0.5}, r"'rewards\.judge\.model' is required"),
    ({"model": "tiny-qwen2-vl", "template": "Grade {answer}: {response}"},
     r"'rewards\.judge\.template' names placeholders \['answer'\]"),
    ({"model": "tiny-qwen2-vl", "template": "Grade {question}"}, r"'rewards\.judge\.template' lacks \{response\}"),
    ({"model": "tiny-qwen2-vl", "template": "Grade {response"}, r"'rewards\.judge\.template' is not a valid template"),
    ({"model": "tiny-qwen2-vl", "timeout_s": 0}, r"'rewards\.judge\.timeout_s' must be > 0"),
    ({"model": "tiny-qwen2-vl", "max_new_tokens": 0}, r"'rewards\.judge\.max_new_tokens' must be a positive integer"),
    ({"model": "tiny-qwen2-vl", "failure_score": "zero"}, r"'rewards\.judge\.failure_score' must be a finite number"),
    ({"model": "tiny-qwen2-vl", "temperature": 0.1}, r"'rewards\.judge' has unknown keys \['temperature'\]"),
])
def test_a_bad_judge_setting_is_named(judge, message):
    with pytest.raises(ConfigError, match=rf"bench\.toml: setting {message}"):
        parse_benchmark_config(config_data(judge), path="bench.toml")


def test_a_dataset_judge_must_be_a_model_key():
    data = config_data(easy={"kind": "easy_vqa", "judge": "gpt-judge"})
    with pytest.raises(ConfigError, match=r"'datasets\.easy\.judge' names model 'gpt-judge', which is not a "):
        parse_benchmark_config(data, path="bench.toml")
    weight = config_data(easy={"kind": "easy_vqa", "judge": "tiny-qwen2-vl", "judge_weight": "half"})
    with pytest.raises(ConfigError, match=r"'datasets\.easy\.judge_weight' must be a finite number"):
        parse_benchmark_config(weight, path="bench.toml")


def test_a_dataset_judge_is_read_from_the_file(tmp_path: Path):
    path = tmp_path / "bench.toml"
    path.write_text('[benchmark]\nbatch_sizes = [1]\n[models.tiny-qwen2-vl]\nsource = "embedded:tiny-qwen2-vl"\n'
                    '[datasets.easy]\nkind = "easy_vqa"\njudge = "tiny-qwen2-vl"\njudge_weight = 0.5\n'
                    '[rewards.judge]\nmodel = "tiny-qwen2-vl"\nmax_new_tokens = 4\n')
    config = load_benchmark_config(path)
    (dataset,) = config.datasets
    assert (dataset.judge, dataset.judge_weight, dict(dataset.settings)) == ("tiny-qwen2-vl", 0.5, {})
    assert config.rewards.judge.max_new_tokens == 4
