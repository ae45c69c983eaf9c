"""One ``benchmark_summary`` row from a partition's generations, scores and stats."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import pandas as pd

from aerorl_ops.generation.partition_run import PartitionStats
from aerorl_ops.metrics import ANLS_CORRECT, RELAXED_ACCURACY_CORRECT, VERIFIER_CORRECT


@dataclass(frozen=True)
class SummaryRow:
    """One partition's ``benchmark_summary`` row, less its partition key (run, model, batch size).

    The fields are the table's columns, in order (``aerorl_ops.storage.schema.SUMMARY_FIELDS``).
    A rate or average is None when there is nothing to divide or average; a telemetry value is
    None when this machine did not measure it.
    """

    model_source: str
    device: str
    samples: int
    wall_s: float
    samples_per_s: float | None
    generated_tokens_per_s: float | None
    latency_avg_ms: float | None
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    model_load_s: float
    pass_rate: float | None
    manual_pass_rate: float | None
    manual_false_passes: int
    average_reward: float | None
    verifier_avg: float | None
    grounding_avg: float | None
    format_avg: float | None
    cost_avg: float | None
    anls_avg: float | None
    relaxed_accuracy_avg: float | None
    verifier_metric_agreement: float | None
    peak_memory_mb: float | None
    gpu_seen: bool
    gpu_util_avg: float | None
    gpu_util_max: float | None
    gpu_memory_avg_mb: float | None
    gpu_memory_max_mb: float | None
    gpu_power_avg_w: float | None
    cpu_percent_avg: float | None
    rss_max_mb: float | None
    created_at: datetime


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


def summary_row(generations: pd.DataFrame, scores: pd.DataFrame, stats: PartitionStats) -> SummaryRow:
    """Throughput, latency, pass rates, reward and metric averages and telemetry of one partition."""
    telemetry = stats.telemetry
    samples = len(generations)
    latency = generations["latency_ms"].astype(float)
    wall = stats.wall_s
    return SummaryRow(
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
        verifier_avg=_mean(scores["verifier"]),
        grounding_avg=_mean(scores["grounding"]),
        format_avg=_mean(scores["format"]),
        cost_avg=_mean(scores["cost"]),
        anls_avg=_mean(scores["anls"]),
        relaxed_accuracy_avg=_mean(scores["relaxed_accuracy"]),
        verifier_metric_agreement=verifier_metric_agreement(scores),
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
