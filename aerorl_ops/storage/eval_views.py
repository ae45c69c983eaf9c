"""Views over the ``eval_*`` tables (``aerorl_ops.storage.schema``).

- ``eval_vs_baseline``: for each (model, baseline, dataset, split), its latest eval (by
  ``eval_runs.started_at``), one row per setting and question type ('all' and each type), and for an
  eval of a mixture per ``source`` (each part, question type 'all'; 'all' on every other row, rows
  stored before the column existed included): both accuracies side by side, the difference and its
  paired confidence interval (``method``: exact McNemar or paired bootstrap), and both models'
  pass@1, mean length, length-clip ratio and reflection ratio.

``create_eval_views`` creates the eval tables when they are missing, then (re)creates the views, so
it can run on any report database.
"""

from __future__ import annotations

import re

import duckdb

from aerorl_ops.storage.duckdb_store import ensure_tables
from aerorl_ops.storage.eval_schema import (
    ALL_SOURCES,
    BASELINE_ROLE,
    EVAL_COMPARISONS,
    EVAL_METRICS,
    EVAL_RUNS,
    EVAL_TABLES,
    MODEL_ROLE,
)

_SLUG = re.compile(r"[a-z_]+")


def _literal(value: str) -> str:
    """A code constant (a role, 'all') as a SQL string literal (view bodies take no parameters)."""
    if not _SLUG.fullmatch(value):
        raise ValueError(f"a constant in a view must be a lower-case slug, got {value!r}")
    return f"'{value}'"


def _source(alias: str) -> str:
    """The row's source, NULL (a row stored before the column) read as 'all'."""
    return f"coalesce({alias}.source, {_literal(ALL_SOURCES)})"


_SIDE_BY_SIDE = ("pass_at_1", "mean_length", "length_clip_ratio", "reflection_ratio")

EVAL_VS_BASELINE = f"""
CREATE OR REPLACE VIEW eval_vs_baseline AS
WITH pairs AS (
    SELECT m.eval_id, m.model, b.model AS baseline, m.dataset, m.split, m.questions, m.started_at
    FROM {EVAL_RUNS.name} m
    JOIN {EVAL_RUNS.name} b ON b.eval_id = m.eval_id AND b.role = {_literal(BASELINE_ROLE)}
    WHERE m.role = {_literal(MODEL_ROLE)}
), latest AS (
    SELECT * FROM pairs
    QUALIFY row_number() OVER (
        PARTITION BY model, baseline, dataset, split ORDER BY started_at DESC NULLS LAST, eval_id DESC) = 1
)
SELECT l.model, l.baseline, l.dataset, l.split, l.eval_id, l.started_at, c.setting, c.question_type,
    {_source("c")} AS source, c.questions,
    c.model_accuracy, c.baseline_accuracy, c.difference, c.ci_low, c.ci_high, c.confidence, c.method, c.p_value,
    {", ".join(f"mm.{name} AS model_{name}, mb.{name} AS baseline_{name}" for name in _SIDE_BY_SIDE)}
FROM latest l
JOIN {EVAL_COMPARISONS.name} c USING (eval_id)
LEFT JOIN {EVAL_METRICS.name} mm ON mm.eval_id = c.eval_id AND mm.role = {_literal(MODEL_ROLE)}
    AND mm.setting = c.setting AND mm.question_type = c.question_type AND {_source("mm")} = {_source("c")}
LEFT JOIN {EVAL_METRICS.name} mb ON mb.eval_id = c.eval_id AND mb.role = {_literal(BASELINE_ROLE)}
    AND mb.setting = c.setting AND mb.question_type = c.question_type AND {_source("mb")} = {_source("c")}
"""

EVAL_VIEWS = {"eval_vs_baseline": EVAL_VS_BASELINE}


def create_eval_views(conn: duckdb.DuckDBPyConnection) -> tuple[str, ...]:
    """Create the eval tables when missing, then create (or replace) every eval view. Returns the view names."""
    ensure_tables(conn, EVAL_TABLES)
    for ddl in EVAL_VIEWS.values():
        conn.execute(ddl)
    return tuple(EVAL_VIEWS)
