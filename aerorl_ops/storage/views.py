"""Views over the benchmark tables: the questions people ask of the report database.

``create_views`` is idempotent (``CREATE OR REPLACE VIEW``); the report asset calls it after
every write, so an existing database picks up new or changed views on the next run.

- ``latest_benchmark_summary``: one row per (model_key, batch_size, dataset), from its latest run.
- ``benchmark_trends``: every run of each (model_key, batch_size, dataset) in time order, with the
  previous run's throughput, pass rate, accuracy, p95 latency and reward and the change from it.
- ``manual_false_passes``: answers the manual baseline passes and the reward stack fails.
- ``verifier_metric_disagreements``: answers where the verifier and the dataset's standard
  metric (DocVQA ANLS, ChartQA relaxed accuracy) disagree on correct/wrong.
- ``benchmark_regressions``: every row of a run whose correctness or greedy text differs from the
  previous run of the same model x batch size x dataset (``change``: lost, gained or text), with both
  answers and scores (``aerorl_ops.reporting.row_regressions``).

A partition's time is ``benchmark_summary.created_at`` (when that partition's report was
written), then its run's ``runs.finished_at``: a rerun of one partition under an old run id
makes that partition, and only that one, the latest.
"""

from __future__ import annotations

import math

import duckdb

from aerorl_ops.metrics import ANLS_CORRECT, RELAXED_ACCURACY_CORRECT, TREND_METRICS, VERIFIER_CORRECT
from aerorl_ops.storage.schema import BENCHMARK_SUMMARY, GENERATIONS, REWARD_SCORES, RUNS


def _literal(value: float) -> str:
    """A threshold constant (``aerorl_ops.metrics``) as SQL text. View bodies cannot take parameters;
    only finite code constants go through here, never values from data or users."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"view threshold must be a finite number, got {value!r}")
    return repr(float(value))


_PARTITION_TIME_ORDER = "s.created_at, r.finished_at, s.run_id"

LATEST_BENCHMARK_SUMMARY = f"""
CREATE OR REPLACE VIEW latest_benchmark_summary AS
SELECT s.*, r.started_at AS run_started_at, r.finished_at AS run_finished_at, r.git_sha
FROM {BENCHMARK_SUMMARY.name} s LEFT JOIN {RUNS.name} r USING (run_id)
QUALIFY row_number() OVER (
    PARTITION BY s.model_key, s.batch_size, s.dataset
    ORDER BY s.created_at DESC NULLS LAST, r.finished_at DESC NULLS LAST, s.run_id DESC) = 1
"""

_TREND_COLUMNS = ",\n    ".join(
    f"lag(s.{m}) OVER w AS previous_{m}, s.{m} - lag(s.{m}) OVER w AS {m}_delta" for m in TREND_METRICS
)

BENCHMARK_TRENDS = f"""
CREATE OR REPLACE VIEW benchmark_trends AS
SELECT s.model_key, s.batch_size, s.dataset, s.run_id, s.created_at, r.finished_at AS run_finished_at, r.git_sha,
    row_number() OVER w AS run_number,
    {", ".join(f"s.{m}" for m in TREND_METRICS)},
    lag(s.run_id) OVER w AS previous_run_id,
    {_TREND_COLUMNS}
FROM {BENCHMARK_SUMMARY.name} s LEFT JOIN {RUNS.name} r USING (run_id)
WINDOW w AS (PARTITION BY s.model_key, s.batch_size, s.dataset ORDER BY {_PARTITION_TIME_ORDER})
"""

MANUAL_FALSE_PASSES = f"""
CREATE OR REPLACE VIEW manual_false_passes AS
SELECT s.run_id, s.model_key, s.batch_size, s.sample_id, s.dataset, g.prompt, g.response, g.reference,
    s.total_reward, s.verifier, s.grounding, s.format, s.cost
FROM {REWARD_SCORES.name} s
JOIN {GENERATIONS.name} g USING (run_id, model_key, batch_size, sample_id)
WHERE s.manual_pass AND NOT s.passed
"""

# The same rule as aerorl_ops.reporting.partition_summary.verifier_metric_agreement: relaxed
# accuracy when present, else ANLS; a missing verifier score counts as "not correct".
VERIFIER_METRIC_DISAGREEMENTS = f"""
CREATE OR REPLACE VIEW verifier_metric_disagreements AS
WITH graded AS (
    SELECT *,
        coalesce(verifier >= {_literal(VERIFIER_CORRECT)}, false) AS verifier_correct,
        CASE WHEN relaxed_accuracy IS NOT NULL THEN 'relaxed_accuracy'
             WHEN anls IS NOT NULL THEN 'anls' END AS metric,
        CASE WHEN relaxed_accuracy IS NOT NULL THEN relaxed_accuracy >= {_literal(RELAXED_ACCURACY_CORRECT)}
             WHEN anls IS NOT NULL THEN anls >= {_literal(ANLS_CORRECT)} END AS metric_correct
    FROM {REWARD_SCORES.name}
)
SELECT s.run_id, s.model_key, s.batch_size, s.sample_id, s.dataset, s.verifier, s.metric,
    coalesce(s.relaxed_accuracy, s.anls) AS metric_value, s.verifier_correct, s.metric_correct,
    g.response, g.reference
FROM graded s
JOIN {GENERATIONS.name} g USING (run_id, model_key, batch_size, sample_id)
WHERE s.metric_correct IS NOT NULL AND s.verifier_correct <> s.metric_correct
"""

ROW_CORRECT = "coalesce(s.correct, false)"
ROW_SCORE = "coalesce(s.relaxed_accuracy, s.anls, s.verifier, 0.0)"
"""A ``reward_scores s`` row's correctness and score (the dataset's metric), as SQL; the per-row regression
check (``aerorl_ops.reporting.row_regressions``) reads rows the same way."""

BENCHMARK_REGRESSIONS = f"""
CREATE OR REPLACE VIEW benchmark_regressions AS
WITH pairs AS (
    SELECT DISTINCT model_key, batch_size, dataset, run_id, previous_run_id FROM benchmark_trends
    WHERE previous_run_id IS NOT NULL
), answered AS (
    SELECT s.run_id, s.model_key, s.batch_size, s.dataset, s.sample_id, {ROW_CORRECT} AS correct,
        {ROW_SCORE} AS score, coalesce(g.response, '') AS response
    FROM {REWARD_SCORES.name} s JOIN {GENERATIONS.name} g USING (run_id, model_key, batch_size, sample_id)
)
SELECT p.model_key, p.batch_size, p.dataset, p.run_id, p.previous_run_id, now.sample_id,
    CASE WHEN before.correct AND NOT now.correct THEN 'lost'
         WHEN now.correct AND NOT before.correct THEN 'gained' ELSE 'text' END AS change,
    before.correct AS previous_correct, now.correct, before.score AS previous_score, now.score,
    now.score - before.score AS score_delta, before.response AS previous_response, now.response
FROM pairs p
JOIN answered now ON now.run_id = p.run_id AND now.model_key = p.model_key AND now.batch_size = p.batch_size
    AND now.dataset = p.dataset
JOIN answered before ON before.run_id = p.previous_run_id AND before.model_key = p.model_key
    AND before.batch_size = p.batch_size AND before.dataset = p.dataset AND before.sample_id = now.sample_id
WHERE before.correct <> now.correct OR before.response <> now.response
"""

VIEWS = {
    "latest_benchmark_summary": LATEST_BENCHMARK_SUMMARY,
    "benchmark_trends": BENCHMARK_TRENDS,
    "manual_false_passes": MANUAL_FALSE_PASSES,
    "verifier_metric_disagreements": VERIFIER_METRIC_DISAGREEMENTS,
    "benchmark_regressions": BENCHMARK_REGRESSIONS,
}


def create_views(conn: duckdb.DuckDBPyConnection) -> tuple[str, ...]:
    """Create (or replace) every view; the benchmark tables must exist. Returns the view names."""
    for ddl in VIEWS.values():
        conn.execute(ddl)
    return tuple(VIEWS)
