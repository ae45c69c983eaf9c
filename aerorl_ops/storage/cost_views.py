"""The cost ledger: device-seconds and their price for every benchmark partition, training run and
evaluation, as views over what those already store.

- ``cost_ledger``: one row per benchmark partition x dataset, training run and eval role: ``kind``
  (benchmark, training, eval), ``run_id`` (the benchmark run, training run or eval id), ``part`` (model x
  batch size / dataset, the environment, or the eval role), ``model_key``, ``batch_size``, ``dataset``,
  ``device_kind`` (gpu or cpu), ``device_seconds`` (GPU-seconds
  where a GPU ran, else CPU core-seconds), ``samples`` (answers generated: a partition's rows, an eval's
  questions x settings' responses; NULL for training), ``price_per_hour`` and ``cost``.
- ``cost_per_1k_samples``: per benchmark run x model x batch size and per eval x model, the cost of 1,000
  samples.
- ``training_cost``: per training run, its cost and held-out accuracy gained (final minus base, points),
  and the cost per point gained (NULL when it gained none).

Device-seconds: a benchmark partition's generation and its share of the model load (the load split over
its datasets), at the process's measured CPU use (``cpu_percent_avg`` / 100 busy cores) or one GPU; a
training run's telemetry window at its CPU use, or its ranks' GPUs; an eval role's measured process CPU
time (``cpu_s``), or its wall time on one GPU. Prices come from the config file's ``[costs]``, written
into the view when it is (re)created, so re-creating with other prices re-prices the whole ledger.
"""

from __future__ import annotations

import math

import duckdb

from aerorl_ops.config.costs import CostSettings
from aerorl_ops.storage.duckdb_store import ensure_tables
from aerorl_ops.storage.eval_schema import EVAL_RUNS, EVAL_SAMPLES, EVAL_TABLES
from aerorl_ops.storage.schema import BENCHMARK_SUMMARY, BENCHMARK_TABLES
from aerorl_ops.storage.training_schema import TRAINING_EVALS, TRAINING_RUNS, TRAINING_TABLES


def _price(value: float) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"a price must be a finite number >= 0, got {value!r}")
    return repr(float(value))


def cost_ledger_sql(costs: CostSettings) -> str:
    cpu, gpu = _price(costs.cpu_core_hour), _price(costs.gpu_hour)
    return f"""
CREATE OR REPLACE VIEW cost_ledger AS
WITH usage AS (
    SELECT 'benchmark' AS kind, run_id, model_key || ' bs' || batch_size || ' / ' || dataset AS part,
        model_key, batch_size, dataset, CASE WHEN device LIKE 'cuda%' THEN 'gpu' ELSE 'cpu' END AS device_kind,
        (coalesce(wall_s, 0) + coalesce(model_load_s, 0) / count(*) OVER (PARTITION BY run_id, model_key, batch_size))
            * CASE WHEN device LIKE 'cuda%' THEN 1 ELSE coalesce(cpu_percent_avg, 100) / 100 END AS device_seconds,
        samples
    FROM {BENCHMARK_SUMMARY.name}
    UNION ALL
    SELECT 'training', run_id, env, base_model, NULL, env,
        CASE WHEN telemetry->>'peak_memory_source' LIKE 'torch%' THEN 'gpu' ELSE 'cpu' END,
        CAST(telemetry->>'sampling_duration_s' AS DOUBLE)
            * coalesce(CAST(config->>'nproc_per_node' AS INTEGER), 1) * coalesce(CAST(config->>'nnodes' AS INTEGER), 1)
            * CASE WHEN telemetry->>'peak_memory_source' LIKE 'torch%' THEN 1
                   ELSE coalesce(CAST(telemetry->>'cpu_avg_pct' AS DOUBLE), 100) / 100 END,
        NULL
    FROM {TRAINING_RUNS.name} WHERE telemetry IS NOT NULL
    UNION ALL
    SELECT 'eval', r.eval_id, r.role, r.model, NULL, r.dataset,
        CASE WHEN r.device LIKE 'cuda%' THEN 'gpu' ELSE 'cpu' END,
        CASE WHEN r.device LIKE 'cuda%' THEN r.wall_s ELSE coalesce(r.cpu_s, r.wall_s) END,
        (SELECT count(*) FROM {EVAL_SAMPLES.name} s WHERE s.eval_id = r.eval_id AND s.role = r.role)
    FROM {EVAL_RUNS.name} r WHERE r.training_run_id IS NULL
)
SELECT *, CASE device_kind WHEN 'gpu' THEN {gpu} ELSE {cpu} END AS price_per_hour,
    device_seconds / 3600 * CASE device_kind WHEN 'gpu' THEN {gpu} ELSE {cpu} END AS cost
FROM usage
"""


COST_PER_1K_SAMPLES = """
CREATE OR REPLACE VIEW cost_per_1k_samples AS
SELECT kind, run_id, model_key, batch_size,
    sum(samples) AS samples, sum(device_seconds) AS device_seconds, sum(cost) AS cost,
    1000 * sum(cost) / nullif(sum(samples), 0) AS cost_per_1k_samples
FROM cost_ledger WHERE kind <> 'training'
GROUP BY ALL
"""

TRAINING_COST = f"""
CREATE OR REPLACE VIEW training_cost AS
WITH gains AS (
    SELECT run_id,
        max(accuracy) FILTER (WHERE phase = 'base') AS base_accuracy,
        max(accuracy) FILTER (WHERE phase = 'final') AS final_accuracy
    FROM {TRAINING_EVALS.name} GROUP BY run_id
)
SELECT l.run_id, l.device_kind, l.device_seconds, l.cost, g.base_accuracy, g.final_accuracy,
    100 * (g.final_accuracy - g.base_accuracy) AS points_gained,
    CASE WHEN g.final_accuracy > g.base_accuracy THEN l.cost / (100 * (g.final_accuracy - g.base_accuracy)) END
        AS cost_per_point
FROM cost_ledger l LEFT JOIN gains g USING (run_id)
WHERE l.kind = 'training'
"""


def create_cost_views(conn: duckdb.DuckDBPyConnection, costs: CostSettings) -> tuple[str, ...]:
    """(Re)create the cost views at ``costs``' prices, creating the tables they read when missing."""
    ensure_tables(conn, (*BENCHMARK_TABLES, *TRAINING_TABLES, *EVAL_TABLES))
    for ddl in (cost_ledger_sql(costs), COST_PER_1K_SAMPLES, TRAINING_COST):
        conn.execute(ddl)
    return ("cost_ledger", "cost_per_1k_samples", "training_cost")
