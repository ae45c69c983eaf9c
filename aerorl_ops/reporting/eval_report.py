"""An eval's side-by-side table, read from the report database: every metric of the model and the
baseline, the difference, and for accuracy the paired confidence interval.

Rows per setting: over all questions, accuracy (mean pass@k) with its interval and the method that
made it, then pass@1, reward, mean length, length-clip ratio and MAYE's five reflection ratios
(NULL where a denominator is zero, and then no difference); then accuracy per question type, each
with its own interval; then, for an eval of a mixture, accuracy per source dataset (``source`` = the
part, ``question_type`` = 'all'), in the mixture's order, each with its own interval. Every other row's
``source`` is 'all' (rows stored before the column existed hold NULL there: read as 'all').
"""

from __future__ import annotations

import duckdb
import pandas as pd

from aerorl_ops.storage.eval_schema import (
    ALL_SOURCES,
    ALL_TYPES,
    BASELINE_ROLE,
    EVAL_COMPARISONS,
    EVAL_METRICS,
    MODEL_ROLE,
    metric_groups,
)

ALL_QUESTIONS_METRICS = ("accuracy", "pass_at_1", "reward_mean", "mean_length", "length_clip_ratio",
                         "reflection_ratio", "reflection_ratio_in_correct", "reflection_ratio_in_incorrect",
                         "correct_ratio_in_reflection", "correct_ratio_in_no_reflection")
COLUMNS = ("setting", "question_type", "source", "metric", "model", "baseline", "difference", "ci", "method")
KEY = ["setting", "question_type", "source"]
"""The columns that name one row of ``eval_metrics`` (per role) and of ``eval_comparisons``."""


def _value(value: object) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _rows(conn: duckdb.DuckDBPyConnection, table: str, eval_id: str) -> pd.DataFrame:
    """``table``'s rows of ``eval_id`` in stored order, a ``source`` NULL or missing (stored before it) read as
    'all'."""
    frame = conn.execute(f"SELECT * FROM {table} WHERE eval_id = ? ORDER BY rowid", [eval_id]).df()
    return frame.assign(source=frame["source"].fillna(ALL_SOURCES).astype(str) if "source" in frame else ALL_SOURCES)


def side_by_side(conn: duckdb.DuckDBPyConnection, eval_id: str) -> pd.DataFrame:
    """The table of eval ``eval_id`` (columns ``COLUMNS``; ``ci`` holds ``(low, high)`` on accuracy rows)."""
    metrics = _rows(conn, EVAL_METRICS.name, eval_id)
    comparisons = _rows(conn, EVAL_COMPARISONS.name, eval_id)
    if metrics.empty:
        raise ValueError(f"no eval {eval_id!r} in the report database (eval_metrics has no rows for it)")
    by_role = {role: group.set_index(KEY) for role, group in metrics.groupby("role")}
    model, baseline = by_role.get(MODEL_ROLE), by_role.get(BASELINE_ROLE)
    compared = comparisons.set_index(KEY) if not comparisons.empty else None
    settings = list(dict.fromkeys(metrics["setting"]))
    types = sorted(set(metrics["question_type"]) - {ALL_TYPES})
    sources = list(dict.fromkeys(source for source in metrics["source"] if source != ALL_SOURCES))
    rows = []
    for setting in settings:
        k = metrics.loc[metrics["setting"] == setting, "k"].iloc[0]
        for question_type, source in metric_groups(types, sources):
            key = (setting, question_type, source)
            if not any(frame is not None and key in frame.index for frame in (model, baseline)):
                continue
            overall = (question_type, source) == (ALL_TYPES, ALL_SOURCES)
            for name in ALL_QUESTIONS_METRICS if overall else ("accuracy",):
                ours = _value(model.loc[key, name]) if model is not None and key in model.index else None
                theirs = _value(baseline.loc[key, name]) if baseline is not None and key in baseline.index else None
                ci = method = None
                if name == "accuracy" and compared is not None and key in compared.index:
                    ci = (float(compared.loc[key, "ci_low"]), float(compared.loc[key, "ci_high"]))
                    method = str(compared.loc[key, "method"])
                rows.append({"setting": setting, "question_type": question_type, "source": source,
                             "metric": f"pass@{int(k)}" if name == "accuracy" else name, "model": ours,
                             "baseline": theirs,
                             "difference": ours - theirs if ours is not None and theirs is not None else None,
                             "ci": ci, "method": method})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _number(value: object) -> str:
    return "NULL" if value is None or (isinstance(value, float) and pd.isna(value)) else f"{value:.4f}"


def format_side_by_side(frame: pd.DataFrame) -> pd.DataFrame:
    """The table with numbers as text (4 decimals, NULL shown), the interval as ``[low, high]``, and the
    difference signed: for printing or markdown. The ``source`` column is shown only for an eval of a
    mixture (one whose rows name a source)."""
    shown = frame.assign(
        model=frame["model"].map(_number), baseline=frame["baseline"].map(_number),
        difference=frame["difference"].map(lambda v: "NULL" if v is None or pd.isna(v) else f"{v:+.4f}"),
        ci=frame["ci"].map(lambda ci: f"[{ci[0]:+.4f}, {ci[1]:+.4f}]" if isinstance(ci, tuple) else ""),
        method=frame["method"].fillna(""))
    if (shown["source"] == ALL_SOURCES).all():
        shown = shown.drop(columns="source")
    return shown.rename(columns={"question_type": "type", "ci": "95% CI"})
