"""Training curves of one run, read from the report database, as PNG bytes.

- ``accuracy_vs_step``: the greedy held-out accuracy (``training_evals``, the run's own held-out sample;
  the no-image prior as a dashed line), and the accuracy at each sampling setting that training recorded
  in ``eval_metrics`` (``eval_runs.training_run_id`` = the run);
- ``reward_kl_vs_step``: the rollout reward and the KL to the reference (``training_steps``);
- ``response_length_vs_step``: the rollout response length (``training_steps``) and each recorded
  setting's mean eval response length;
- ``reflection_vs_step``: each recorded setting's reflection ratio.

A figure with nothing to plot raises ``ValueError`` (as ``aerorl_ops.reporting.plots`` does);
``save_training_plots`` skips it. Figures are rendered as in ``plots`` (Agg, 600x400, no metadata).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd
from matplotlib.figure import Figure

from aerorl_ops.reporting.artifacts import safe_path_component
from aerorl_ops.reporting.plots import DPI, FIGSIZE_IN, _figure, _png
from aerorl_ops.storage.eval_schema import EVAL_METRICS, EVAL_RUNS
from aerorl_ops.storage.training_schema import TRAINING_EVALS, TRAINING_STEPS

PRIOR_PHASE, CONTROL_PHASE = "no_image_prior", "control"


@dataclass(frozen=True)
class TrainingCurves:
    """One run's rows: per step (``steps``), greedy held-out evals (``evals``) and per-setting evals (``settings``)."""

    run_id: str
    steps: pd.DataFrame
    evals: pd.DataFrame
    settings: pd.DataFrame


def _tables(conn: duckdb.DuckDBPyConnection) -> set[str]:
    return {name for (name,) in conn.execute("SELECT table_name FROM information_schema.tables").fetchall()}


def _has_column(conn: duckdb.DuckDBPyConnection, table: str, column: str) -> bool:
    """Whether ``table`` has ``column`` (a table written before the column existed has not)."""
    return bool(conn.execute("SELECT 1 FROM information_schema.columns WHERE table_name = ? AND column_name = ?",
                             [table, column]).fetchall())


def training_curves(conn: duckdb.DuckDBPyConnection, run_id: str) -> TrainingCurves:
    """The rows of ``run_id`` the training figures plot; a missing table reads as no rows."""
    tables = _tables(conn)

    def read(table: str, sql: str, columns: list[str]) -> pd.DataFrame:
        if table not in tables:
            return pd.DataFrame(columns=columns)
        return conn.execute(sql, [run_id]).df()

    steps_columns = ["step", "phase", "reward_mean", "kl", "response_length", "response_clip_ratio"]
    steps = read(TRAINING_STEPS.name, f"SELECT {', '.join(steps_columns)} FROM {TRAINING_STEPS.name} "
                 "WHERE run_id = ? ORDER BY step", steps_columns)
    own_sample = "AND distribution IS NULL " if _has_column(conn, TRAINING_EVALS.name, "distribution") else ""
    evals = read(TRAINING_EVALS.name, f"SELECT step, phase, accuracy FROM {TRAINING_EVALS.name} WHERE run_id = ? "
                 f"{own_sample}ORDER BY step, phase", ["step", "phase", "accuracy"])
    settings_columns = ["step", "setting", "accuracy", "mean_length", "length_clip_ratio", "reflection_ratio"]
    settings = pd.DataFrame(columns=settings_columns)
    if {EVAL_RUNS.name, EVAL_METRICS.name} <= tables:
        settings = conn.execute(
            f"SELECT r.step, m.setting, m.accuracy, m.mean_length, m.length_clip_ratio, m.reflection_ratio "
            f"FROM {EVAL_METRICS.name} m JOIN {EVAL_RUNS.name} r USING (eval_id, role) "
            "WHERE r.training_run_id = ? AND r.step IS NOT NULL AND m.question_type = 'all' "
            "AND coalesce(m.source, 'all') = 'all' "
            "ORDER BY m.setting, r.step", [run_id]).df()
    return TrainingCurves(run_id, steps, evals, settings)


def _nothing(curves: TrainingCurves, what: str) -> ValueError:
    return ValueError(f"run {curves.run_id!r} has no {what} recorded; there is nothing to plot")


def _setting_lines(axes, settings: pd.DataFrame, column: str) -> int:
    drawn = 0
    for name, group in settings.dropna(subset=[column]).groupby("setting", sort=True):
        axes.plot(group["step"], group[column], marker="o", markersize=3, label=str(name))
        drawn += 1
    return drawn


def _label_step_axes(axes, title: str, ylabel: str) -> None:
    """Title, "step" on x, ``ylabel`` on y, a light grid and the legend."""
    axes.set_title(title)
    axes.set_xlabel("step")
    axes.set_ylabel(ylabel)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8)


def accuracy_vs_step_png(curves: TrainingCurves) -> bytes:
    evals = curves.evals.dropna(subset=["accuracy"])
    greedy = evals[~evals["phase"].isin([PRIOR_PHASE, CONTROL_PHASE])]
    figure, axes = _figure()
    drawn = _setting_lines(axes, curves.settings, "accuracy")
    if not greedy.empty:
        axes.plot(greedy["step"], greedy["accuracy"], color="black", marker="o", markersize=3,
                  label="greedy held-out")
        drawn += 1
    if not drawn:
        raise _nothing(curves, "evaluations")
    for _, row in evals[evals["phase"] == PRIOR_PHASE].iterrows():
        axes.axhline(row["accuracy"], color="gray", linestyle="--", label="no-image prior")
    _label_step_axes(axes, f"Accuracy vs step ({curves.run_id})", "accuracy")
    axes.set_ylim(-0.02, 1.02)
    return _png(figure)


def reward_kl_vs_step_png(curves: TrainingCurves) -> bytes:
    reward = curves.steps.dropna(subset=["reward_mean"])
    kl = curves.steps.dropna(subset=["kl"])
    if reward.empty and kl.empty:
        raise _nothing(curves, "rollout reward or KL")
    figure = Figure(figsize=FIGSIZE_IN, dpi=DPI, layout="constrained")
    top, bottom = figure.subplots(2, 1, sharex=True)
    top.plot(reward["step"], reward["reward_mean"], color="tab:blue")
    top.set_ylabel("reward (mean)")
    top.set_title(f"Reward and KL vs step ({curves.run_id})")
    bottom.plot(kl["step"], kl["kl"], color="tab:red")
    bottom.set_ylabel("KL to reference")
    bottom.set_xlabel("step")
    for axes in (top, bottom):
        axes.grid(True, alpha=0.3)
    return _png(figure)


def response_length_vs_step_png(curves: TrainingCurves) -> bytes:
    steps = curves.steps.dropna(subset=["response_length"])
    figure, axes = _figure()
    drawn = _setting_lines(axes, curves.settings, "mean_length")
    if not steps.empty:
        axes.plot(steps["step"], steps["response_length"], color="black", label="rollouts")
        drawn += 1
    if not drawn:
        raise _nothing(curves, "response lengths")
    _label_step_axes(axes, f"Response length vs step ({curves.run_id})", "mean response length (tokens)")
    return _png(figure)


def reflection_vs_step_png(curves: TrainingCurves) -> bytes:
    figure, axes = _figure()
    if not _setting_lines(axes, curves.settings, "reflection_ratio"):
        raise _nothing(curves, "reflection ratios (sampling-setting evaluations)")
    _label_step_axes(axes, f"Reflection ratio vs step ({curves.run_id})", "share of responses with a reflection word")
    return _png(figure)


TRAINING_FIGURES = {
    "accuracy_vs_step": accuracy_vs_step_png,
    "reward_kl_vs_step": reward_kl_vs_step_png,
    "response_length_vs_step": response_length_vs_step_png,
    "reflection_vs_step": reflection_vs_step_png,
}


def write_png(path: Path, png: bytes) -> Path:
    """Write ``png`` to ``path`` atomically (a temporary file, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(png)
    partial.replace(path)
    return path


def training_plots_dir(database: str | Path, run_id: str) -> Path:
    """Where run ``run_id``'s figures go: ``plots/training/<run_id>/`` beside the report database."""
    return Path(database).resolve().parent / "plots" / "training" / safe_path_component(run_id)


def save_training_plots(conn: duckdb.DuckDBPyConnection, run_id: str, folder: Path) -> dict[str, Path]:
    """Every training figure of ``run_id`` with something to plot, as ``<folder>/<name>.png``."""
    curves = training_curves(conn, run_id)
    saved = {}
    for name, render in TRAINING_FIGURES.items():
        try:
            png = render(curves)
        except ValueError:  # nothing recorded for this figure
            continue
        saved[name] = write_png(Path(folder) / f"{name}.png", png)
    return saved
