"""``generations``: every cached row through one model at one batch size (one partition)."""


import dagster as dg
import pyarrow as pa

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.config.fields import checked
from aerorl_ops.config.generation import GenerationSettings
from aerorl_ops.envs.configured import row_max_new_tokens
from aerorl_ops.generation.batched import BatchProgress
from aerorl_ops.generation.partition_run import partition_stats, run_generation
from aerorl_ops.rows import TaskItem, table_to_items
from assets.benchmark.partitions import partition_parts
from assets.metadata import markdown_preview, readable
from assets.resources import ModelRuntime
from assets.settings_config import config_class, settings_values
from assets.step_placement import gpu_request_tags


def generation_config_class(generation: GenerationSettings) -> type[dg.Config]:
    """``generations`` run config: the ``[generation]`` settings (defaults: the file's values) and ``limit``."""
    return config_class("GenerationConfig", generation,
                        "Decoding settings of this run (defaults: the config file's [generation]); limit 0 means "
                        "all rows.", exclude=("seed",), extra={"limit": (int, 0, "at most this many rows; 0 = all")})


def rows_inputs(bench: BenchmarkConfig) -> dict[str, dg.AssetIn]:
    """The rows asset of each dataset the benchmark runs on."""
    return {dataset.asset_name: dg.AssetIn(dataset.asset_name) for dataset in bench.benchmarked}


def progress_logger(context: dg.AssetExecutionContext):
    def log(progress: BatchProgress) -> None:
        context.log.info(f"generated {progress.done}/{progress.total} samples, {progress.rate:.2f} samples/s, "
                         f"ETA {progress.eta_s:.0f} s")
    return log


def build_generations(bench: BenchmarkConfig, partitions: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    """The ``generations`` asset of the models and settings in ``bench``."""
    GenerationConfig = generation_config_class(bench.generation)  # a Config class, made per config file

    @dg.asset(group_name="benchmark", partitions_def=partitions, kinds={"pytorch", "parquet"},
              ins=rows_inputs(bench), op_tags=gpu_request_tags(bench.executor.gpus_per_partition))
    def generations(context: dg.AssetExecutionContext, config: GenerationConfig, model_runtime: ModelRuntime,
                    **dataset_rows: pa.Table) -> dg.Output[pa.Table]:
        """Batched, left-padded greedy generation over every benchmarked dataset's rows, each with its own
        prompt, with latency, token and telemetry figures."""
        settings = checked(GenerationSettings, "run config: generations", "generation",
                           settings_values(config, GenerationSettings), seed=bench.seed)
        rows = [item for dataset in bench.benchmarked for item in table_to_items(dataset_rows[dataset.asset_name])]
        return generate_partition(context, bench, rows[: config.limit or None], settings, model_runtime)

    return generations


def generate_partition(context: dg.AssetExecutionContext, bench: BenchmarkConfig, rows: list[TaskItem],
                       settings: GenerationSettings, model_runtime: ModelRuntime) -> dg.Output[pa.Table]:
    """Generate ``rows`` with the partition's model at its batch size; the table and its figures."""
    model_key, batch_size = partition_parts(context)
    loaded = model_runtime.load(bench.model(model_key))
    context.log.info(f"loaded {model_key} from {loaded.source.location} on {loaded.device} "
                     f"in {loaded.load_seconds:.2f} s")
    table = run_generation(loaded, rows, batch_size, settings, model_runtime.telemetry_interval_s,
                           on_progress=progress_logger(context), max_new_tokens=row_max_new_tokens(bench.benchmarked))
    stats = partition_stats(table)
    frame = table.select(["sample_id", "response", "generated_tokens", "latency_ms"]).to_pandas()
    return dg.Output(table, metadata=readable({
        "dagster/row_count": table.num_rows,
        "samples_per_s": stats.samples / stats.wall_s if stats.wall_s else 0.0,
        "generated_tokens": int(frame["generated_tokens"].sum()),
        "model_load_s": stats.model_load_s,
        "device": stats.device,
        "gpu_seen": bool(stats.telemetry and stats.telemetry.gpu_seen),
        "peak_memory_mb": float(stats.telemetry.peak_memory_mb if stats.telemetry else 0.0),
        "preview": markdown_preview(frame),
    }))
