"""Held-out distributions as configuration: a ``[datasets.<name>]`` table's ``held_out`` names other tables; a
run training on it draws each as its own environment and rows asset (``rl.run.inputs``, ``assets.run_rows``)."""

from __future__ import annotations

import re

import pytest

from aerorl_ops.config.benchmark import ConfigError, parse_benchmark_config
from aerorl_ops.config.dataset_kinds import check_datasets
from aerorl_ops.config.datasets import held_out_tables
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.registry import dataset_kinds
from aerorl_ops.rl.record.recorder import HELD_OUT_STAGE, TRAINING_STAGE
from aerorl_ops.rl.run.inputs import EVAL_SAMPLE_SEED, distribution_stage, run_datasets

MINIMAL = {"benchmark": {"batch_sizes": [1]}, "models": {"tiny-qwen2-vl": {"source": "embedded:tiny-qwen2-vl"}}}
PAIRS = {"kind": "easy_vqa_combinations", "split": "train", "limit": 100, "held_out": ["unseen_pairs", "test_pairs"]}
DATASETS = {"seen_pairs": PAIRS,
            "unseen_pairs": {"kind": "easy_vqa_combinations", "split": "test", "limit": 50,
                             "combinations": "held_out"},
            "test_pairs": {"kind": "easy_vqa_combinations", "split": "test", "limit": 50, "seed": 3}}


def parsed(datasets: dict):
    return check_datasets(parse_benchmark_config({**MINIMAL, "datasets": datasets}, path="bench.toml"),
                          dataset_kinds())


def test_a_table_names_its_held_out_distributions_in_order():
    config = parsed(DATASETS)
    seen = config.datasets[0]
    assert seen.held_out == ("unseen_pairs", "test_pairs") and seen.settings == {}  # a table setting, not a kind's
    assert [d.name for d in held_out_tables(seen, config.datasets)] == ["unseen_pairs", "test_pairs"]
    assert held_out_tables(config.datasets[1], config.datasets) == ()


@pytest.mark.parametrize(("held_out", "problem"), [
    (["nowhere"], "names ['nowhere'], not configured; configured: seen_pairs, unseen_pairs, test_pairs"),
    (["seen_pairs"], "names the dataset itself"),
    (["test_pairs", "test_pairs"], "lists a dataset twice: ['test_pairs', 'test_pairs']"),
    ("test_pairs", "must be a list of non-empty strings, got 'test_pairs'"),
])
def test_a_bad_held_out_list_names_the_file_and_the_setting(held_out, problem):
    with pytest.raises(ConfigError, match=re.escape(f"bench.toml: setting 'datasets.seen_pairs.held_out' {problem}")):
        parsed({**DATASETS, "seen_pairs": {**PAIRS, "held_out": held_out}})


def test_a_run_on_the_table_draws_each_distribution_at_the_held_out_sample_size():
    config = parsed(DATASETS)
    settings = TrainingSettings(env="seen_pairs", eval_env="test_pairs", eval_size=20, sampled_eval_size=0)
    chosen = run_datasets(settings, 0, config.datasets)
    assert [(d.name, d.split, d.limit, d.seed) for d in chosen.distributions] == [
        ("unseen_pairs", "test", 20, EVAL_SAMPLE_SEED), ("test_pairs", "test", 20, EVAL_SAMPLE_SEED)]
    assert list(chosen.by_stage()) == [TRAINING_STAGE, HELD_OUT_STAGE, "held_out:unseen_pairs", "held_out:test_pairs"]
    assert distribution_stage("unseen_pairs") == "held_out:unseen_pairs"
    plain = run_datasets(TrainingSettings(env="easy_vqa", sampled_eval_size=0), 0, config.datasets)
    assert plain.distributions == ()  # a registry kind has no held-out distributions


def test_each_distribution_is_a_rows_asset_of_its_own():
    from dataclasses import replace

    from assets.run_rows import distribution_rows_key, training_rows

    config = replace(parsed(DATASETS), training=TrainingSettings(env="seen_pairs", eval_env="test_pairs",
                                                                 eval_size=20, sampled_eval_size=0))
    rows = training_rows(config)
    assert rows["held_out:unseen_pairs"].key.path == ["training", "held_out_unseen_pairs_rows"]
    assert rows["held_out:unseen_pairs"].dataset.limit == 20
    assert distribution_rows_key("test_pairs").path == ["training", "held_out_test_pairs_rows"]
