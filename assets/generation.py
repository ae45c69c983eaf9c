"""``generations``: every cached row through one model at one batch size (one partition)."""


import dagster as dg
import pyarrow as pa

from aerorl_ops.generation.batched import BatchProgress, GenerationSettings
from aerorl_ops.generation.partition_run import partition_stats, run_generation
from aerorl_ops.rows import table_to_rows
from assets.metadata import markdown_preview
from assets.partitions import benchmark_config, benchmark_partitions, partition_parts
from assets.resources import ModelRuntime


class GenerationConfig(dg.Config):
    """Decoding settings. max_new_tokens 0 means the benchmark config's value; limit 0 means all rows."""

    max_new_tokens: int = 0
    limit: int = 0


def progress_logger(context: dg.AssetExecutionContext):
    def log(progress: BatchProgress) -> None:
        context.log.info(f"generated {progress.done}/{progress.total} samples, {progress.rate:.2f} samples/s, "
                         f"ETA {progress.eta_s:.0f} s")
    return log


@dg.asset(group_name="benchmark", partitions_def=benchmark_partitions, kinds={"pytorch", "parquet"})
def generations(context: dg.AssetExecutionContext, config: GenerationConfig, model_runtime: ModelRuntime,
                docvqa_rows: pa.Table, chartqa_rows: pa.Table) -> dg.Output[pa.Table]:
    """Batched, left-padded greedy generation with latency, token and telemetry figures."""
    model_key, batch_size = partition_parts(context)
    bench = benchmark_config()
    rows = table_to_rows(docvqa_rows) + table_to_rows(chartqa_rows)
    if config.limit:
        rows = rows[: config.limit]
    settings = GenerationSettings(max_new_tokens=config.max_new_tokens or bench.max_new_tokens, seed=bench.seed)
    loaded = model_runtime.load(bench.model(model_key))
    context.log.info(f"loaded {model_key} from {loaded.source.location} on {loaded.device} "
                     f"in {loaded.load_seconds:.2f} s")
    table = run_generation(loaded, rows, batch_size, settings, model_runtime.telemetry_interval_s,
                           on_progress=progress_logger(context))
    stats = partition_stats(table)
    frame = table.select(["sample_id", "response", "generated_tokens", "latency_ms"]).to_pandas()
    return dg.Output(table, metadata={
        "dagster/row_count": table.num_rows,
        "samples_per_s": stats.samples / stats.wall_s if stats.wall_s else 0.0,
        "generated_tokens": int(frame["generated_tokens"].sum()),
        "model_load_s": stats.model_load_s,
        "device": stats.device,
        "gpu_seen": bool(stats.telemetry.get("gpu_seen")),
        "peak_memory_mb": float(stats.telemetry.get("peak_memory_mb") or 0.0),
        "preview": markdown_preview(frame),
    })
