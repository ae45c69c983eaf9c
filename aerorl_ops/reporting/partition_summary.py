"""One ``benchmark_summary`` row from a partition's generations, scores and stats."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pandas as pd

from aerorl_ops.generation.partition_run import PartitionStats

VERIFIER_CORRECT = 0.5  # AeroRL's verifier gives 1.0 exact, 0.5 contained, -0.5 wrong
ANLS_CORRECT = 0.5


def _mean(series: pd.Series) -> float | None:
    series = series.dropna()
    return float(series.mean()) if len(series) else None


def verifier_metric_agreement(scores: pd.DataFrame) -> float | None:
    """Share of rows with a standard metric where the verifier and the metric agree on correct/wrong."""
    metric_correct = pd.Series(np.nan, index=scores.index, dtype="object")
    has_anls = scores["anls"].notna()
    has_relaxed = scores["relaxed_accuracy"].notna()
    metric_correct[has_anls] = scores.loc[has_anls, "anls"] >= ANLS_CORRECT
    metric_correct[has_relaxed] = scores.loc[has_relaxed, "relaxed_accuracy"] >= 1.0
    graded = metric_correct.notna()
    if not graded.any():
        return None
    verifier_correct = scores.loc[graded, "verifier"] >= VERIFIER_CORRECT
    return float((verifier_correct == metric_correct[graded].astype(bool)).mean())


def summary_row(generations: pd.DataFrame, scores: pd.DataFrame, stats: PartitionStats) -> dict[str, object]:
    """Throughput, latency, pass rates, reward and metric averages and telemetry of one partition."""
    telemetry = stats.telemetry
    samples = len(generations)
    latency = generations["latency_ms"].astype(float)
    wall = stats.wall_s
    return {
        "model_source": stats.model_source,
        "device": stats.device,
        "samples": samples,
        "wall_s": wall,
        "samples_per_s": samples / wall if wall > 0 else None,
        "generated_tokens_per_s": float(generations["generated_tokens"].sum()) / wall if wall > 0 else None,
        "latency_avg_ms": float(latency.mean()) if samples else None,
        "latency_p50_ms": float(np.percentile(latency, 50)) if samples else None,
        "latency_p95_ms": float(np.percentile(latency, 95)) if samples else None,
        "model_load_s": stats.model_load_s,
        "pass_rate": _mean(scores["passed"].astype(float)),
        "manual_pass_rate": _mean(scores["manual_pass"].astype(float)),
        "manual_false_passes": int((scores["manual_pass"] & ~scores["passed"]).sum()),
        "average_reward": _mean(scores["total_reward"]),
        "verifier_avg": _mean(scores["verifier"]),
        "grounding_avg": _mean(scores["grounding"]),
        "format_avg": _mean(scores["format"]),
        "cost_avg": _mean(scores["cost"]),
        "anls_avg": _mean(scores["anls"]),
        "relaxed_accuracy_avg": _mean(scores["relaxed_accuracy"]),
        "verifier_metric_agreement": verifier_metric_agreement(scores),
        "peak_memory_mb": telemetry.get("peak_memory_mb"),
        "gpu_seen": bool(telemetry.get("gpu_seen")),
        "gpu_util_avg": telemetry.get("gpu_util_avg_pct"),
        "gpu_util_max": telemetry.get("gpu_util_max_pct"),
        "gpu_memory_avg_mb": telemetry.get("gpu_memory_avg_mb"),
        "gpu_memory_max_mb": telemetry.get("gpu_memory_max_mb"),
        "gpu_power_avg_w": telemetry.get("gpu_power_avg_w"),
        "cpu_percent_avg": telemetry.get("cpu_avg_pct"),
        "rss_max_mb": telemetry.get("rss_max_mb"),
        "created_at": datetime.now(timezone.utc),
    }
