"""The [eval] table: MAYE's settings by default, n / k / greedy from the file, errors that name the key."""

from __future__ import annotations

import pytest

from aerorl_ops.config.benchmark import parse_benchmark_config
from aerorl_ops.config.evaluation import EvalSettings
from aerorl_ops.config.fields import ConfigError
from aerorl_ops.eval_metrics.sampling import MAYE_SAMPLING_SETTINGS

BASE = {"benchmark": {"batch_sizes": [1]}, "models": {"tiny": {"source": "embedded:tiny-qwen2-vl"}}}


def parse(**eval_table) -> EvalSettings:
    return parse_benchmark_config({**BASE, "eval": eval_table}, "eval.toml").eval


def test_the_defaults_are_mayes_three_settings():
    assert parse().sampling_settings() == MAYE_SAMPLING_SETTINGS


def test_samples_k_and_greedy_change_the_settings():
    high, medium, low = parse(samples=16, k=4, greedy=True).sampling_settings()
    assert (high.name, high.n, high.k, high.temperature) == ("high_temp_pass4", 16, 4, 1.0)
    assert medium == MAYE_SAMPLING_SETTINGS[1]
    assert (low.name, low.greedy, low.n) == ("greedy_pass1", True, 1)


@pytest.mark.parametrize(("table", "message"), [
    ({"k": 9}, "k=9 exceeds samples=8"),
    ({"n": 0}, "setting 'eval.n' must be a positive integer"),
    ({"dataset": ""}, "setting 'eval.dataset' must be a non-empty string"),
    ({"temperature": 0.5}, "setting 'eval.temperature' belongs in [generation] or [training], not in [eval]"),
    ({"shots": 3}, "setting 'eval' has unknown keys ['shots']"),
])
def test_bad_values_name_the_setting(table, message):
    with pytest.raises(ConfigError) as error:
        parse(**table)
    assert message in str(error.value)


def test_an_eval_key_in_another_table_says_where_it_belongs():
    with pytest.raises(ConfigError, match=r"setting 'training.greedy' belongs in \[eval\]"):
        parse_benchmark_config({**BASE, "training": {"greedy": True}}, "eval.toml")
