"""`aerorl bench`: materialize the whole benchmark on the persistent local instance."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import dagster as dg
import duckdb
from tqdm import tqdm

from aerorl_ops.config.benchmark import BenchmarkConfig, ConfigError
from assets.benchmark.partitions import BATCH_DIMENSION, MODEL_DIMENSION
from assets.project import benchmark_config
from assets.runs import BENCHMARK_RUN_TAG

QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


@dataclass(frozen=True)
class BenchPlan:
    run_id: str
    partition_keys: tuple[dg.MultiPartitionKey, ...]


def plan_bench(models: Sequence[str] = (), batch_sizes: Sequence[int] = (), run_id: str | None = None,
               config: BenchmarkConfig | None = None) -> BenchPlan:
    """Which partitions of ``config`` (default: the shipped config file) to run; unknown model keys or
    batch sizes fail here, before anything loads."""
    config = config or benchmark_config()
    for model in models:
        config.model(model)
    unknown = [size for size in batch_sizes if size not in config.batch_sizes]
    if unknown:
        raise ConfigError(f"{config.path}: batch sizes {unknown} are not configured; "
                          f"configured: {list(config.batch_sizes)}")
    keys = tuple(
        dg.MultiPartitionKey({MODEL_DIMENSION: model, BATCH_DIMENSION: str(size)})
        for model in (models or config.model_keys)
        for size in (batch_sizes or config.batch_sizes)
    )
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return BenchPlan(run_id or f"bench-{stamp}-{uuid.uuid4().hex[:6]}", keys)


def benchmarked_rows_assets(defs: dg.Definitions) -> list[dg.AssetsDefinition]:
    """The rows assets ``generations`` reads: one per dataset the benchmark runs on."""
    return [defs.get_assets_def(key) for key in sorted(defs.get_assets_def("generations").dependency_keys)]


def run_bench(plan: BenchPlan, defs: dg.Definitions, instance: dg.DagsterInstance, refresh_rows: bool = True,
              show_progress: bool = True, ops_config: dict | None = None) -> list[dg.ExecuteInProcessResult]:
    """The benchmarked datasets' rows, then each planned partition of the ``benchmark`` job of ``defs`` (built
    from the config file); ``ops_config`` is the partitions' run config per op (from the command-line flags)."""
    tags = {BENCHMARK_RUN_TAG: plan.run_id}
    results = []
    if refresh_rows:
        rows = benchmarked_rows_assets(defs)
        results.append(dg.materialize(rows, instance=instance, tags=tags, resources=defs.resources,
                                      run_config=QUIET_LOGS, raise_on_error=False))
    job = defs.resolve_job_def("benchmark")
    run_config = {**QUIET_LOGS, "ops": ops_config or {}}
    for key in tqdm(plan.partition_keys, desc="benchmark partitions", unit="partition", disable=not show_progress):
        result = job.execute_in_process(partition_key=key, instance=instance, tags=tags, run_config=run_config,
                                        raise_on_error=False)
        if not result.success:
            tqdm.write(f"partition {key} failed (run {result.run_id}); see `aerorl dev` for its logs")
        results.append(result)
    return results


def summary_table(database: str, run_id: str) -> str:
    with duckdb.connect(database, read_only=True) as conn:
        frame = conn.execute(
            "SELECT model_key, batch_size, dataset, samples, round(accuracy, 3) AS accuracy, "
            "round(samples_per_s, 2) AS samples_per_s, "
            "round(generated_tokens_per_s, 1) AS tokens_per_s, round(latency_p50_ms, 1) AS p50_ms, "
            "round(latency_p95_ms, 1) AS p95_ms, round(pass_rate, 3) AS pass_rate, "
            "round(peak_memory_mb, 1) AS peak_mem_mb FROM benchmark_summary WHERE run_id = ? "
            "ORDER BY model_key, batch_size, dataset",
            [run_id],
        ).df()
    return frame.to_string(index=False)
