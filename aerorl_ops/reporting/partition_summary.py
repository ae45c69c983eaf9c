"""``benchmark_summary`` rows (``storage.schema.SummaryRow``) from a partition's generations, scores and
stats: one per dataset.

Each dataset's row keeps the columns' meaning over that dataset's samples: its sample count,
latency percentiles, pass rates, reward averages and ``accuracy`` (mean of ``correct``). Its
``wall_s`` is its share of the partition's generation time: each batch's wall time split over
the batch's rows, summed over the dataset's rows and scaled so the datasets' shares add up to
the partition's ``wall_s``; ``samples_per_s`` and ``generated_tokens_per_s`` divide by it. Model
load time and telemetry are the partition's, on every dataset's row.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pandas as pd

from aerorl_ops.config.rewards import REWARD_COMPONENT_NAMES
from aerorl_ops.generation.partition_run import PartitionStats
from aerorl_ops.metrics import ANLS_CORRECT, RELAXED_ACCURACY_CORRECT, VERIFIER_CORRECT
from aerorl_ops.storage.schema import SummaryRow


def _mean(series: pd.Series) -> float | None:
    series = series.dropna()
    return float(series.mean()) if len(series) else None


def verifier_metric_agreement(scores: pd.DataFrame) -> float | None:
    """Share of rows with a standard metric where the verifier and the metric agree on correct/wrong."""
    metric_correct = pd.Series(np.nan, index=scores.index, dtype="object")
    has_anls = scores["anls"].notna()
    has_relaxed = scores["relaxed_accuracy"].notna()
    metric_correct[has_anls] = scores.loc[has_anls, "anls"] >= ANLS_CORRECT
    metric_correct[has_relaxed] = scores.loc[has_relaxed, "relaxed_accuracy"] >= RELAXED_ACCURACY_CORRECT
    graded = metric_correct.notna()
    if not graded.any():
        return None
    verifier_correct = scores.loc[graded, "verifier"] >= VERIFIER_CORRECT
    return float((verifier_correct == metric_correct[graded].astype(bool)).mean())


def wall_shares(generations: pd.DataFrame, wall_s: float) -> pd.Series:
    """Each row's share of the partition's wall time: its batch's wall time over the batch's rows,
    scaled so the shares add up to ``wall_s`` (rows of a batch whose time is unknown share nothing).

    >>> frame = pd.DataFrame({"batch_index": [0, 0, 1], "batch_latency_ms": [200.0, 200.0, 100.0]})
    >>> wall_shares(frame, 0.6).round(3).tolist()
    [0.2, 0.2, 0.2]
    """
    per_batch = generations.groupby("batch_index")["batch_index"].transform("size")
    raw = generations["batch_latency_ms"].astype(float).fillna(0.0).clip(lower=0.0) / per_batch
    total = raw.sum()
    return raw * (wall_s / total) if total > 0 else pd.Series(0.0, index=generations.index)


def summary_rows(generations: pd.DataFrame, scores: pd.DataFrame, stats: PartitionStats) -> list[SummaryRow]:
    """One row per dataset of the partition (in order of first appearance), see the module docstring."""
    shares = wall_shares(generations, stats.wall_s) if len(generations) else pd.Series(dtype=float)
    rows = []
    for dataset in pd.unique(generations["dataset"]):
        mine = generations["dataset"] == dataset
        ids = generations.loc[mine, "sample_id"]
        rows.append(summary_row(generations[mine], scores[scores["sample_id"].isin(ids)], stats, str(dataset),
                                wall_s=float(shares[mine].sum())))
    return rows


def summary_row(generations: pd.DataFrame, scores: pd.DataFrame, stats: PartitionStats, dataset: str,
                wall_s: float | None = None) -> SummaryRow:
    """Throughput, latency, pass rates, reward and metric averages, accuracy and telemetry of one
    dataset's rows (``wall_s``: their share of the partition's time; default: all of it)."""
    telemetry = stats.telemetry
    samples = len(generations)
    latency = generations["latency_ms"].astype(float)
    wall = stats.wall_s if wall_s is None else wall_s
    return SummaryRow(
        dataset=dataset,
        model_source=stats.model_source,
        device=stats.device,
        samples=samples,
        wall_s=wall,
        samples_per_s=samples / wall if wall > 0 else None,
        generated_tokens_per_s=float(generations["generated_tokens"].sum()) / wall if wall > 0 else None,
        latency_avg_ms=float(latency.mean()) if samples else None,
        latency_p50_ms=float(np.percentile(latency, 50)) if samples else None,
        latency_p95_ms=float(np.percentile(latency, 95)) if samples else None,
        model_load_s=stats.model_load_s,
        pass_rate=_mean(scores["passed"].astype(float)),
        manual_pass_rate=_mean(scores["manual_pass"].astype(float)),
        manual_false_passes=int((scores["manual_pass"] & ~scores["passed"]).sum()),
        average_reward=_mean(scores["total_reward"]),
        **{f"{name}_avg": _mean(scores[name]) for name in REWARD_COMPONENT_NAMES},
        anls_avg=_mean(scores["anls"]),
        relaxed_accuracy_avg=_mean(scores["relaxed_accuracy"]),
        verifier_metric_agreement=verifier_metric_agreement(scores),
        accuracy=_mean(scores["correct"].astype(float)),
        peak_memory_mb=telemetry.peak_memory_mb if telemetry else None,
        gpu_seen=telemetry.gpu_seen if telemetry else False,
        gpu_util_avg=telemetry.gpu_util_avg_pct if telemetry else None,
        gpu_util_max=telemetry.gpu_util_max_pct if telemetry else None,
        gpu_memory_avg_mb=telemetry.gpu_memory_avg_mb if telemetry else None,
        gpu_memory_max_mb=telemetry.gpu_memory_max_mb if telemetry else None,
        gpu_power_avg_w=telemetry.gpu_power_avg_w if telemetry else None,
        cpu_percent_avg=telemetry.cpu_avg_pct if telemetry else None,
        rss_max_mb=telemetry.rss_max_mb if telemetry else None,
        created_at=datetime.now(UTC),
    )
