"""The benchmark's partitions: one per (model key, batch size), built once per definitions from the
config file they are built from."""

from __future__ import annotations

import dagster as dg

from aerorl_ops.config.benchmark import BenchmarkConfig

MODEL_DIMENSION = "model"
BATCH_DIMENSION = "batch_size"


def build_benchmark_partitions(config: BenchmarkConfig) -> dg.MultiPartitionsDefinition:
    return dg.MultiPartitionsDefinition({
        MODEL_DIMENSION: dg.StaticPartitionsDefinition(list(config.model_keys)),
        BATCH_DIMENSION: dg.StaticPartitionsDefinition([str(size) for size in config.batch_sizes]),
    })


def partition_parts(context: dg.AssetExecutionContext) -> tuple[str, int]:
    """(model key, batch size) of the partition being materialized."""
    keys = context.partition_key.keys_by_dimension
    return keys[MODEL_DIMENSION], int(keys[BATCH_DIMENSION])
