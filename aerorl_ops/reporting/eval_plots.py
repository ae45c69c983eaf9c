"""The picture of one eval (a model against its baseline), read from the report database, as PNG bytes.

``eval_accuracy_png``: on the left, each setting's accuracy (mean pass@k over all questions) of the
model and of the baseline as bars, with +-1.96 standard errors (cut at 0 and 1); on the right, the
paired difference model - baseline with its confidence interval (``eval_comparisons``), and zero marked.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from aerorl_ops.reporting.plots import DPI, _png
from aerorl_ops.reporting.training_plots import write_png
from aerorl_ops.storage.eval_schema import BASELINE_ROLE, EVAL_COMPARISONS, EVAL_METRICS, EVAL_RUNS, MODEL_ROLE

Z_95 = 1.959963984540054


def _short(name: str) -> str:
    """A model key as is; a checkpoint path as its last two parts."""
    parts = Path(name).parts
    return name if len(parts) <= 2 else str(Path(*parts[-2:]))


def eval_frames(conn: duckdb.DuckDBPyConnection, eval_id: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per role and setting (all questions): accuracy and its standard error, with the model's name; and
    per setting the comparison row. Settings keep their eval order."""
    metrics = conn.execute(
        f"SELECT m.role, r.model, m.setting, m.k, m.accuracy, m.accuracy_stderr FROM {EVAL_METRICS.name} m "
        f"JOIN {EVAL_RUNS.name} r USING (eval_id, role) WHERE m.eval_id = ? AND m.question_type = 'all' "
        "AND coalesce(m.source, 'all') = 'all'", [eval_id]).df()
    comparisons = conn.execute(
        f"SELECT setting, difference, ci_low, ci_high, method, confidence FROM {EVAL_COMPARISONS.name} "
        "WHERE eval_id = ? AND question_type = 'all' AND coalesce(source, 'all') = 'all'", [eval_id]).df()
    return metrics, comparisons


def _setting_order(conn: duckdb.DuckDBPyConnection, eval_id: str, metrics: pd.DataFrame) -> list[str]:
    row = conn.execute(f"SELECT settings FROM {EVAL_RUNS.name} WHERE eval_id = ? ORDER BY role DESC LIMIT 1",
                       [eval_id]).fetchone()
    named = [setting["name"] for setting in json.loads(row[0])] if row and row[0] else []
    return [name for name in named if name in set(metrics["setting"])] or sorted(set(metrics["setting"]))


def eval_accuracy_png(conn: duckdb.DuckDBPyConnection, eval_id: str) -> bytes:
    metrics, comparisons = eval_frames(conn, eval_id)
    if metrics.empty:
        raise ValueError(f"eval {eval_id!r} has no metrics recorded; there is nothing to plot")
    settings = _setting_order(conn, eval_id, metrics)
    positions = np.arange(len(settings))  # [S]
    figure = Figure(figsize=(9.0, 4.0), dpi=DPI, layout="constrained")
    bars, differences = figure.subplots(1, 2, width_ratios=[3, 2])
    roles = [role for role in (MODEL_ROLE, BASELINE_ROLE) if role in set(metrics["role"])]
    width = 0.8 / len(roles)
    for number, role in enumerate(roles):
        rows = metrics[metrics["role"] == role].set_index("setting").reindex(settings)
        offsets = positions + (number - (len(roles) - 1) / 2) * width  # [S]
        label = f"{role}: {_short(str(rows['model'].dropna().iloc[0]))}"
        accuracy = rows["accuracy"].to_numpy(dtype=float)  # [S]
        half = Z_95 * rows["accuracy_stderr"].fillna(0.0).to_numpy(dtype=float)  # [S]
        errors = np.vstack([np.minimum(half, accuracy), np.minimum(half, 1.0 - accuracy)])  # [2, S] kept in [0, 1]
        bars.bar(offsets, accuracy, width, yerr=errors, capsize=3, label=label)
    bars.set_xticks(positions, labels=settings, fontsize=8)
    bars.set_ylabel("accuracy (mean pass@k)")
    bars.set_ylim(0.0, 1.05)
    bars.set_title(f"Accuracy per setting ({eval_id})", fontsize=10)
    bars.legend(fontsize=8)
    bars.grid(True, axis="y", alpha=0.3)
    if not comparisons.empty:
        rows = comparisons.set_index("setting").reindex(settings)
        errors = np.vstack([rows["difference"] - rows["ci_low"], rows["ci_high"] - rows["difference"]])  # [2, S]
        differences.errorbar(rows["difference"], positions, xerr=errors, fmt="o", capsize=4, color="tab:purple")
        confidence = float(comparisons["confidence"].iloc[0])
        differences.set_xlabel(f"model - baseline ({confidence:.0%} paired CI)")
    differences.axvline(0.0, color="gray", linestyle="--")
    differences.set_yticks(positions, labels=settings, fontsize=8)
    differences.invert_yaxis()
    differences.set_title("Paired difference", fontsize=10)
    differences.grid(True, axis="x", alpha=0.3)
    return _png(figure)


def save_eval_plots(conn: duckdb.DuckDBPyConnection, eval_id: str, folder: Path) -> dict[str, Path]:
    """The eval's figure as ``<folder>/accuracy_by_setting.png``."""
    return {"accuracy_by_setting": write_png(Path(folder) / "accuracy_by_setting.png",
                                             eval_accuracy_png(conn, eval_id))}
