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


def key_parts(partitions: dg.PartitionsDefinition, partition_key: object) -> tuple[str, int]:
    """(model key, batch size) of a partition key. A run launched with only its ``dagster/partition``
    tag (``execute_job`` on a distributed executor, a run of checks alone) carries the key as a plain
    ``"8|model"`` string, so the key is parsed with the partitions definition."""
    keys = partitions.get_partition_key_from_str(str(partition_key)).keys_by_dimension
    return keys[MODEL_DIMENSION], int(keys[BATCH_DIMENSION])


def partition_parts(context: dg.AssetExecutionContext) -> tuple[str, int]:
    """(model key, batch size) of the partition being materialized."""
    return key_parts(context.assets_def.partitions_def, context.partition_key)
