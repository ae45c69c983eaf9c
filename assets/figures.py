"""Figures of a run or an eval as PNG files beside the report database and as inline metadata.

The PNGs go under ``<folder of the DuckDB file>/plots/`` (``reports/plots/`` with the default
resources): ``training/<run_id>/<figure>.png`` and ``eval/<eval_id>/<figure>.png``.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import duckdb

from aerorl_ops.reporting.artifacts import safe_path_component
from aerorl_ops.reporting.eval_plots import save_eval_plots
from aerorl_ops.reporting.training_plots import TRAINING_FIGURES, training_plots_dir
from assets.metadata import inline_png


def plots_dir(database: str, kind: str, name: str) -> Path:
    return Path(database).resolve().parent / "plots" / kind / safe_path_component(name)


def _metadata(saved: dict[str, Path], names) -> dict[str, dg.MetadataValue]:
    metadata = {}
    for name in names:
        path = saved.get(name)
        metadata[name] = inline_png(name.replace("_", " "), path.read_bytes() if path else None)
        if path:
            metadata[f"{name}_png"] = dg.MetadataValue.path(str(path))
    return metadata


def training_figures(database: str, run_id: str) -> dict[str, dg.MetadataValue]:
    """Every training figure of ``run_id`` that its run saved (``rl.reporters.FiguresReporter``), inline;
    a note where there was nothing to plot."""
    folder = training_plots_dir(database, run_id)
    saved = {name: folder / f"{name}.png" for name in TRAINING_FIGURES if (folder / f"{name}.png").exists()}
    return _metadata(saved, TRAINING_FIGURES)


def eval_figures(conn: duckdb.DuckDBPyConnection, database: str, eval_id: str) -> dict[str, dg.MetadataValue]:
    """The eval's figure, saved and inline."""
    saved = save_eval_plots(conn, eval_id, plots_dir(database, "eval", eval_id))
    return _metadata(saved, saved)
