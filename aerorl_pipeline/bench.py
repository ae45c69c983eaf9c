"""`aerorl bench`: materialize the whole benchmark on the persistent local instance."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Collection, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
from tqdm import tqdm

from aerorl_ops.config.benchmark import BenchmarkConfig, ConfigError
from aerorl_ops.models.sources import check_local_model
from aerorl_ops.stop import stop_here
from aerorl_pipeline.celery_workers import local_workers
from aerorl_pipeline.console import CONSOLE_LOGS, console_job
from aerorl_pipeline.definitions import build_definitions
from aerorl_pipeline.distributed_bench import (
    BenchResources,
    PartitionOutcome,
    none_lost,
    resources_of,
    run_partitions,
)
from aerorl_pipeline.executors import celery_app
from aerorl_pipeline.failures import failure_from_results
from aerorl_pipeline.sql import REPORT_LOCK_WAIT_S, SqlError, connect_when_unlocked
from assets.benchmark.partitions import BATCH_DIMENSION, MODEL_DIMENSION
from assets.project import MODELS_DIR, benchmark_config
from assets.runs import BENCHMARK_RUN_TAG, new_benchmark_run_id

QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
"""Run config of the partitions that run on another engine (their workers' logs): Dagster's console at WARNING."""


@dataclass(frozen=True)
class BenchPlan:
    run_id: str
    partition_keys: tuple[dg.MultiPartitionKey, ...]


def plan_bench(models: Sequence[str] = (), batch_sizes: Sequence[int] = (), run_id: str | None = None,
               config: BenchmarkConfig | None = None) -> BenchPlan:
    """Which partitions of ``config`` (default: the shipped config file) to run; unknown model keys or
    batch sizes, and a model folder that cannot load (no config.json, not a VLM, no processor), fail
    here, before any weights load."""
    config = config or benchmark_config()
    for model in models or config.model_keys:
        check_local_model(config.model(model), MODELS_DIR)
    unknown = [size for size in batch_sizes if size not in config.batch_sizes]
    if unknown:
        raise ConfigError(f"{config.path}: batch sizes {unknown} are not configured; "
                          f"configured: {list(config.batch_sizes)}")
    keys = tuple(
        dg.MultiPartitionKey({MODEL_DIMENSION: model, BATCH_DIMENSION: str(size)})
        for model in (models or config.model_keys)
        for size in (batch_sizes or config.batch_sizes)
    )
    return BenchPlan(run_id or new_benchmark_run_id(datetime.now(UTC), uuid.uuid4().hex), keys)


def benchmarked_rows_assets(defs: dg.Definitions) -> list[dg.AssetsDefinition]:
    """The rows assets ``generations`` reads: one per dataset the benchmark runs on."""
    return [defs.get_assets_def(key) for key in sorted(defs.get_assets_def("generations").dependency_keys)]


def rows_selection(defs: dg.Definitions, refresh_rows: bool | Collection[str]) -> list[dg.AssetKey]:
    """The benchmarked rows assets to materialize: every one (``True``), none (``False``), or those named."""
    keys = [rows.key for rows in benchmarked_rows_assets(defs)]
    if isinstance(refresh_rows, bool):
        return keys if refresh_rows else []
    return [key for key in keys if key.to_user_string() in refresh_rows]


def materialize_rows(plan: BenchPlan, defs: dg.Definitions, instance: dg.DagsterInstance,
                     keys: Sequence[dg.AssetKey] | None = None) -> dg.ExecuteInProcessResult:
    """The benchmarked datasets' rows (or only the rows assets ``keys``), in this process (their rejections
    go to the report database)."""
    job = console_job(defs.resolve_implicit_global_asset_job_def())
    return job.execute_in_process(asset_selection=list(rows_selection(defs, True) if keys is None else keys),
                                  instance=instance, tags={BENCHMARK_RUN_TAG: plan.run_id}, run_config=CONSOLE_LOGS,
                                  raise_on_error=False)


def run_bench(plan: BenchPlan, defs: dg.Definitions, instance: dg.DagsterInstance,
              refresh_rows: bool | Collection[str] = True, show_progress: bool = True,
              ops_config: dict | None = None, resume: bool = False) -> list[dg.ExecuteInProcessResult]:
    """The benchmarked datasets' rows, then each planned partition of the ``benchmark`` job of ``defs`` (built
    from the config file); ``ops_config`` is the partitions' run config per op (from the command-line flags).
    ``refresh_rows``: every benchmarked dataset's rows (``True``), none (``False``: the cached ones are read),
    or the rows assets named (``aerorl_pipeline.stale_rows.rows_to_refresh``). Rows that fail stop it there:
    no partition runs on them. ``resume``: the partitions the benchmark run has finished are not run again
    (``aerorl_pipeline.bench_resume``). A stop asked for by a signal stops it after the partition in hand
    (``StopRequested``)."""
    tags = {BENCHMARK_RUN_TAG: plan.run_id}
    rows = rows_selection(defs, refresh_rows)
    results = [materialize_rows(plan, defs, instance, rows)] if rows else []
    if results and not results[0].success:
        return results
    plan = still_to_run(plan, defs, instance, ops_config, resume)
    job = console_job(defs.resolve_job_def("benchmark"))
    run_config = {**CONSOLE_LOGS, "ops": ops_config or {}}
    total = len(plan.partition_keys)
    for done, key in enumerate(tqdm(plan.partition_keys, desc="benchmark partitions", unit="partition",
                                    disable=not show_progress), start=1):
        result = job.execute_in_process(partition_key=key, instance=instance, tags=tags, run_config=run_config,
                                        raise_on_error=False)
        failure = failure_from_results([result])
        if failure is not None:
            tqdm.write(f"aerorl: partition {key} failed: {failure.message} (Dagster run {result.run_id}: its "
                       "trace is in `aerorl dev`)", file=sys.stderr)
        results.append(result)
        stop_here(f"interrupted after partition {done} of {total} (benchmark run {plan.run_id}): its finished "
                  "partitions are in the report; rerun the command for every partition")
    return results


def still_to_run(plan: BenchPlan, defs: dg.Definitions, instance: dg.DagsterInstance, ops_config: dict | None,
                 resume: bool) -> BenchPlan:
    """``plan``, less the partitions its benchmark run has finished when ``resume`` (once the rows are fresh)."""
    if not resume:
        return plan
    from aerorl_pipeline.bench_resume import unfinished

    rows = [rows.key for rows in benchmarked_rows_assets(defs)]
    return replace(plan, partition_keys=unfinished(instance, plan.run_id, plan.partition_keys, ops_config or {}, rows))


SUMMARY_COLUMNS = (
    "s.model_key, s.batch_size, s.dataset, s.samples, round(s.accuracy, 3) AS accuracy, "
    "round(s.samples_per_s, 2) AS samples_per_s, "
    "round(s.generated_tokens_per_s, 1) AS tokens_per_s, round(s.latency_p50_ms, 1) AS p50_ms, "
    "round(s.latency_p95_ms, 1) AS p95_ms, round(s.pass_rate, 3) AS pass_rate, "
    "round(s.peak_memory_mb, 1) AS peak_mem_mb")
SUMMARY_WITH_COSTS = (
    f"SELECT {SUMMARY_COLUMNS}, round(c.device_seconds, 1) AS device_s, "
    "round(1000 * c.cost / nullif(s.samples, 0), 5) AS cost_per_1k "
    "FROM benchmark_summary s LEFT JOIN cost_ledger c ON c.kind = 'benchmark' AND c.run_id = s.run_id "
    "AND c.model_key = s.model_key AND c.batch_size = s.batch_size AND c.dataset = s.dataset "
    "WHERE s.run_id = ? ORDER BY s.model_key, s.batch_size, s.dataset")
SUMMARY_WITHOUT_COSTS = (
    f"SELECT {SUMMARY_COLUMNS}, NULL AS device_s, NULL AS cost_per_1k FROM benchmark_summary s "
    "WHERE s.run_id = ? ORDER BY s.model_key, s.batch_size, s.dataset")


def summary_table(database: str, run_id: str) -> str:
    """Run ``run_id``'s ``benchmark_summary`` rows with their costs, as text; where no partition has written
    the summary (every partition failed on a fresh database), a line saying so, and no costs where
    ``cost_ledger`` is missing."""
    if not Path(database).is_file():
        return f"no report database at {database}: no partition of benchmark run {run_id} finished"
    try:  # another command (a training run beside the bench) may be writing: wait for its write to end
        connection = connect_when_unlocked(Path(database), REPORT_LOCK_WAIT_S, time.sleep)
    except SqlError as error:  # the bench's rows are written; only this table is not shown
        return f"the summary is not shown: {error}"
    with connection as conn:
        present = {name for (name,) in conn.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        if "benchmark_summary" not in present:
            return f"no benchmark_summary in {database}: no partition of benchmark run {run_id} finished"
        query = SUMMARY_WITH_COSTS if "cost_ledger" in present else SUMMARY_WITHOUT_COSTS
        frame = conn.execute(query, [run_id]).df()
    return frame.to_string(index=False)


def run_bench_distributed(plan: BenchPlan, config_path: Path, instance: dg.DagsterInstance,
                          resources: BenchResources | None = None, refresh_rows: bool | Collection[str] = True,
                          ops_config: dict | None = None, parallel: int | None = None,
                          log_dir: Path | None = None, quiet: bool = True,
                          resume: bool = False) -> list[PartitionOutcome]:
    """The rows here (``refresh_rows`` and ``resume`` as ``run_bench`` takes them), then every planned partition
    as a run on the config's ``[executor]``, launched concurrently. With Celery's folder broker (no
    ``celery_broker``), ``workers`` partition workers and the report writer are started on this machine for the
    duration, logging to ``log_dir`` (default ``<celery_dir>/workers``); ``quiet=False`` lets each step's
    Dagster events into those logs."""
    config = benchmark_config(config_path)
    resources = resources or BenchResources()
    defs = build_definitions(config_path, resources_of(config_path, resources))
    outcomes = []
    selected = rows_selection(defs, refresh_rows)
    if selected:
        rows = materialize_rows(plan, defs, instance, selected)
        outcomes.append(PartitionOutcome("rows", rows.run_id, rows.success))
    plan = still_to_run(plan, defs, instance, ops_config, resume)
    if not plan.partition_keys:
        return outcomes  # every one finished: no worker to start
    run_config = {**(QUIET_LOGS if quiet else {}), "ops": ops_config or {}}
    tags = {BENCHMARK_RUN_TAG: plan.run_id}
    parallel = parallel or config.executor.workers
    app = celery_app(config.executor) if config.executor.kind == "celery" else None
    with ExitStack() as stack:
        lost = none_lost
        if app is not None and app.is_local:
            folder = log_dir or app.folder / "workers"
            folder.mkdir(parents=True, exist_ok=True)
            lost = stack.enter_context(local_workers(app, config.executor.workers, folder)).lost
        outcomes += run_partitions(config_path, resources, instance, [str(key) for key in plan.partition_keys],
                                   tags, run_config, parallel, lost)
    for outcome in outcomes:
        if not outcome.success:
            tqdm.write(f"partition {outcome.partition_key} failed (run {outcome.run_id}): "
                       f"{outcome.error.strip().splitlines()[-1] if outcome.error.strip() else 'see its logs'}")
    return outcomes
