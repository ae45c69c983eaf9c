"""The benchmark's partitions: one per (model key, batch size), defined once from the config file."""

from __future__ import annotations

from functools import cache

import dagster as dg

from aerorl_ops.config.benchmark import BenchmarkConfig, load_benchmark_config
from assets.project import BENCHMARK_CONFIG_PATH

MODEL_DIMENSION = "model"
BATCH_DIMENSION = "batch_size"


@cache
def benchmark_config() -> BenchmarkConfig:
    """The repository's benchmark config, read once per process."""
    return load_benchmark_config(BENCHMARK_CONFIG_PATH)


def build_benchmark_partitions(config: BenchmarkConfig) -> dg.MultiPartitionsDefinition:
    return dg.MultiPartitionsDefinition({
        MODEL_DIMENSION: dg.StaticPartitionsDefinition(list(config.model_keys)),
        BATCH_DIMENSION: dg.StaticPartitionsDefinition([str(size) for size in config.batch_sizes]),
    })


benchmark_partitions = build_benchmark_partitions(benchmark_config())


def partition_parts(context: dg.AssetExecutionContext) -> tuple[str, int]:
    """(model key, batch size) of the partition being materialized."""
    keys = context.partition_key.keys_by_dimension
    return keys[MODEL_DIMENSION], int(keys[BATCH_DIMENSION])
