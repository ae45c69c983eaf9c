"""`aerorl bench` planning: which partitions run, and refusals that name the bad input."""

from __future__ import annotations

import dagster as dg
import pytest

from aerorl_ops.config.benchmark import ConfigError
from aerorl_pipeline.bench import plan_bench
from assets.benchmark.partitions import build_benchmark_partitions
from assets.project import benchmark_config


def test_default_plan_is_every_configured_partition():
    plan = plan_bench()
    assert set(plan.partition_keys) == set(build_benchmark_partitions(benchmark_config()).get_partition_keys())
    assert len(plan.partition_keys) == len(set(plan.partition_keys))
    assert plan.run_id.startswith("bench-")
    assert plan_bench().run_id != plan.run_id


def test_plan_for_one_model_and_batch_size_keeps_the_given_run_id():
    plan = plan_bench(["tiny-qwen2-vl"], [4], run_id="rerun-7")
    assert plan == plan_bench(["tiny-qwen2-vl"], [4], run_id="rerun-7")
    assert plan.run_id == "rerun-7"
    assert plan.partition_keys == (dg.MultiPartitionKey({"model": "tiny-qwen2-vl", "batch_size": "4"}),)


def test_unknown_model_key_is_refused_by_name():
    with pytest.raises((ConfigError, SystemExit)) as raised:
        plan_bench(["qwen-nonexistent"])
    assert "'qwen-nonexistent'" in str(raised.value)
    assert "tiny-qwen2-vl" in str(raised.value)  # and the configured keys are listed


def test_unknown_batch_size_is_refused_by_value():
    with pytest.raises((ConfigError, SystemExit)) as raised:
        plan_bench(batch_sizes=[4, 3])
    message = str(raised.value)
    assert "[3]" in message and "batch sizes" in message
