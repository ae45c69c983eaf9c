"""The plain functions the benchmark asset bodies wrap: run keys, input hashes, reward overrides."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from aerorl_ops.config.benchmark import ConfigError
from aerorl_ops.rows import items_to_table
from assets.benchmark.reports import input_hashes, with_key
from assets.project import benchmark_config
from assets.settings_config import reward_config_class, reward_settings


def test_with_key_adds_the_partition_columns():
    table = with_key(pd.DataFrame({"sample_id": ["a", "b"]}), "run-1", "tiny", 4, dagster_run_id="d1")
    assert table.to_pylist() == [
        {"sample_id": s, "run_id": "run-1", "model_key": "tiny", "batch_size": 4, "dagster_run_id": "d1"}
        for s in ("a", "b")]


def test_input_hashes_follow_answers_not_questions(few_rows):
    docs, charts = items_to_table(few_rows[:3]), items_to_table(few_rows[3:])
    hashes = input_hashes({"docvqa_rows": docs, "chartqa_rows": charts})
    assert set(hashes) == {"docvqa_rows", "chartqa_rows"} and hashes == input_hashes(
        {"chartqa_rows": charts, "docvqa_rows": docs})
    reworded = [dataclasses.replace(few_rows[0], question="Something else?")] + list(few_rows[1:3])
    assert input_hashes({"docvqa_rows": items_to_table(reworded), "chartqa_rows": charts}) == hashes
    reanswered = [dataclasses.replace(few_rows[0], answers=("other",))] + list(few_rows[1:3])
    changed = input_hashes({"docvqa_rows": items_to_table(reanswered), "chartqa_rows": charts})
    assert changed["docvqa_rows"] != hashes["docvqa_rows"] and changed["chartqa_rows"] == hashes["chartqa_rows"]


def effective_reward_settings(**overrides):
    """The reward settings of a ``reward_scores`` run config with ``overrides`` (the rest: the file's)."""
    RewardConfig = reward_config_class(benchmark_config().rewards)
    return reward_settings(RewardConfig(**overrides), "run config: reward_scores")


def test_reward_overrides_keep_the_files_other_settings():
    base = benchmark_config().rewards
    settings = effective_reward_settings(pass_threshold=0.9, target_tokens=8)
    assert (settings.pass_threshold, settings.target_tokens) == (0.9, 8)
    assert (settings.weights, settings.require_json, settings.latency_budget_ms) == (
        base.weights, base.require_json, base.latency_budget_ms)
    assert effective_reward_settings() == base


def test_one_weight_override_keeps_the_other_weights():
    RewardConfig = reward_config_class(benchmark_config().rewards)
    weights = RewardConfig.model_fields["weights"].annotation
    settings = reward_settings(RewardConfig(weights=weights(cost=0.0)), "run config: reward_scores")
    assert settings.weights == {**benchmark_config().rewards.weights, "cost": 0.0}


def test_invalid_reward_override_names_the_setting():
    with pytest.raises(ConfigError, match=r"run config: reward_scores: setting 'rewards\.target_tokens'"):
        effective_reward_settings(target_tokens=0)
