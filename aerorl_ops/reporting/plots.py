"""Report figures as PNG bytes, small enough to attach to asset metadata.

Every function builds its own :class:`matplotlib.figure.Figure` (no pyplot, no global
backend switch), renders it with Agg at 6x4 inches and 100 dpi (600x400 pixels), and
strips the PNG's software/version metadata, so the same data gives the same bytes.
Rows are sorted before plotting, so row order does not change the output either.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

FIGSIZE_IN = (6.0, 4.0)
DPI = 100
_MAX_BINS = 40


def throughput_vs_batch_size_png(summary: pd.DataFrame) -> bytes:
    """One line per ``model_key``: ``samples_per_s`` against ``batch_size`` (log2 x-axis).

    Rows repeating a (model_key, batch_size) pair are averaged.
    """
    data = _require(summary, "summary", ("model_key", "batch_size", "samples_per_s"), "throughput_vs_batch_size_png")
    if (data["batch_size"] <= 0).any():
        raise ValueError("throughput_vs_batch_size_png: summary has batch_size <= 0; batch sizes must be positive")
    data = data.assign(model_key=data["model_key"].astype(str))
    means = data.groupby(["model_key", "batch_size"], sort=True)["samples_per_s"].mean()

    figure, axes = _figure()
    for model_key, series in means.groupby(level="model_key", sort=True):
        batch_sizes = series.index.get_level_values("batch_size")
        axes.plot(batch_sizes, series.to_numpy(), marker="o", label=model_key)
    batch_sizes = sorted(data["batch_size"].unique())
    axes.set_xscale("log", base=2)
    axes.set_xticks(batch_sizes, labels=[f"{size:g}" for size in batch_sizes])
    axes.minorticks_off()
    axes.set_title("Throughput vs batch size")
    axes.set_xlabel("batch size")
    axes.set_ylabel("samples / s")
    axes.grid(True, alpha=0.3)
    axes.legend(title="model")
    return _png(figure)


def reward_distribution_png(scores: pd.DataFrame) -> bytes:
    """Histogram of ``total_reward``; one overlaid histogram per ``model_key`` when present."""
    data = _require(scores, "scores", ("total_reward",), "reward_distribution_png")
    edges = _bin_edges(data["total_reward"].to_numpy(dtype=float))

    figure, axes = _figure()
    if "model_key" in data.columns:
        for model_key, group in _groups(data, ["model_key"]):
            axes.hist(group["total_reward"], bins=edges, alpha=0.5, label=model_key)
        axes.legend(title="model")
    else:
        axes.hist(data["total_reward"], bins=edges)
    axes.set_title("Reward distribution")
    axes.set_xlabel("total reward")
    axes.set_ylabel("count")
    return _png(figure)


def latency_distribution_png(generations: pd.DataFrame) -> bytes:
    """Box plot of ``latency_ms`` per (model_key, batch_size) when either column is present,
    else a histogram of all latencies."""
    data = _require(generations, "generations", ("latency_ms",), "latency_distribution_png")
    keys = [column for column in ("model_key", "batch_size") if column in data.columns]

    figure, axes = _figure()
    if keys:
        groups = _groups(data, keys)
        axes.boxplot([group["latency_ms"].to_numpy(dtype=float) for _, group in groups])
        axes.set_xticks(range(1, len(groups) + 1), labels=[label for label, _ in groups])
        axes.tick_params(axis="x", labelrotation=30 if len(groups) > 4 else 0, labelsize=8)
        axes.set_xlabel(" / ".join(keys))
        axes.set_ylabel("latency (ms)")
    else:
        axes.hist(data["latency_ms"], bins=_bin_edges(data["latency_ms"].to_numpy(dtype=float)))
        axes.set_xlabel("latency (ms)")
        axes.set_ylabel("count")
    axes.set_title("Generation latency")
    return _png(figure)


def _require(frame: pd.DataFrame, name: str, columns: tuple[str, ...], caller: str) -> pd.DataFrame:
    """The rows of ``frame`` with every required column present and not null."""
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise ValueError(f"{caller}: {name} is missing column(s) {missing}; it needs {list(columns)}")
    data = frame.dropna(subset=list(columns))
    if data.empty:
        raise ValueError(
            f"{caller}: {name} has no rows with {', '.join(columns)} set; "
            "there is nothing to plot until those values are produced"
        )
    return data


def _groups(data: pd.DataFrame, keys: list[str]) -> list[tuple[str, pd.DataFrame]]:
    """(label, rows) per distinct key combination, sorted by key values."""
    grouped = data.groupby(keys, sort=True)
    return [(" / ".join(_label(key, value) for key, value in zip(keys, values, strict=True)), group)
            for values, group in grouped]


def _label(key: str, value: object) -> str:
    return f"bs={value}" if key == "batch_size" else str(value)


def _bin_edges(values: np.ndarray) -> np.ndarray:
    edges = np.histogram_bin_edges(values, bins="auto")
    if len(edges) > _MAX_BINS + 1:
        edges = np.histogram_bin_edges(values, bins=_MAX_BINS)
    return edges


def _figure():
    figure = Figure(figsize=FIGSIZE_IN, dpi=DPI, layout="constrained")
    return figure, figure.add_subplot()


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()
