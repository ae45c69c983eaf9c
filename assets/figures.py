"""Figures of a run, an eval or a benchmark partition as PNG files beside the report database and as
inline metadata.

The PNGs go under ``<folder of the DuckDB file>/plots/`` (``reports/plots/`` with the default
resources): ``training/<run_id>/<figure>.png``, ``eval/<eval_id>/<figure>.png`` and
``benchmark/<run_id>/<model_key>__bs<N>/<figure>.png``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

import dagster as dg
import duckdb
import pandas as pd

from aerorl_ops.reporting.artifacts import safe_path_component
from aerorl_ops.reporting.eval_plots import save_eval_plots
from aerorl_ops.reporting.training_plots import TRAINING_FIGURES, training_plots_dir, write_png
from assets.metadata import inline_png


class Figure(NamedTuple):
    """A figure to draw: its title, the plot function (PNG bytes; ValueError when there is nothing to
    plot) and the data it plots."""

    title: str
    render: Callable[[pd.DataFrame], bytes]
    data: pd.DataFrame


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
    """Every training figure of ``run_id`` that its run saved (``rl.record.reporters.FiguresReporter``), inline;
    a note where there was nothing to plot."""
    folder = training_plots_dir(database, run_id)
    saved = {name: folder / f"{name}.png" for name in TRAINING_FIGURES if (folder / f"{name}.png").exists()}
    return _metadata(saved, TRAINING_FIGURES)


def eval_figures(conn: duckdb.DuckDBPyConnection, database: str, eval_id: str) -> dict[str, dg.MetadataValue]:
    """The eval's figure, saved and inline."""
    saved = save_eval_plots(conn, eval_id, plots_dir(database, "eval", eval_id))
    return _metadata(saved, saved)


def benchmark_plots_dir(database: str, run_id: str, model_key: str, batch_size: int) -> Path:
    """``plots/benchmark/<run_id>/<model_key>__bs<N>/`` beside the report database."""
    return plots_dir(database, "benchmark", run_id) / safe_path_component(f"{model_key}__bs{batch_size}")


def saved_figures(folder: Path, figures: Mapping[str, Figure]) -> dict[str, dg.MetadataValue]:
    """Each figure written to ``<folder>/<name>.png`` and inline (its path as ``<name>_png``); a note,
    and no file, where there is nothing to plot."""
    metadata = {}
    for name, figure in figures.items():
        try:
            png = figure.render(figure.data)
        except ValueError as error:
            metadata[name] = dg.MetadataValue.md(f"_{figure.title}: nothing to plot ({error})_")
            continue
        metadata[name] = inline_png(figure.title, png)
        metadata[f"{name}_png"] = dg.MetadataValue.path(str(write_png(folder / f"{name}.png", png)))
    return metadata
