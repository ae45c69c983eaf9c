"""The ``benchmark_summary`` row of one partition, from hand-made generations, scores and telemetry."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from aerorl_ops.generation.partition_run import PartitionStats
from aerorl_ops.reporting.partition_summary import SummaryRow, summary_row, summary_rows, verifier_metric_agreement
from aerorl_ops.telemetry import TelemetrySample, TelemetrySummary, summarize
from aerorl_ops.telemetry.nvml import GpuReading

GENERATIONS = pd.DataFrame({"latency_ms": [10.0, 20.0, 30.0, 40.0], "generated_tokens": [1, 2, 3, 4]})
SCORES = pd.DataFrame({
    "passed": [True, False, True, False],
    "manual_pass": [True, True, False, False],
    "total_reward": [0.8, 0.1, 0.4, -0.2],
    "verifier": [1.0, 0.5, -0.5, 0.5],
    "grounding": [1.0, 0.0, 1.0, 0.0],
    "format": [1.0, 1.0, 1.0, -0.3],
    "cost": [1.0, 1.0, 0.5, 1.0],
    # docvqa rows have ANLS, chartqa rows relaxed accuracy
    "anls": [1.0, None, 0.2, None],
    "relaxed_accuracy": [None, 1.0, None, 0.0],
    "correct": [True, True, False, False],
})


def telemetry() -> TelemetrySummary:
    gpu = ("GPU-0", 50.0, 1000.0, 100.0), ("GPU-0", 70.0, 3000.0, 200.0)
    readings = zip((400.0, 600.0), (50.0, 150.0), gpu, strict=True)
    samples = [TelemetrySample(0.1 * i, rss_mb=rss, cpu_pct=cpu, gpus=(GpuReading(0, name, util, mem, power),))
               for i, (rss, cpu, (name, util, mem, power)) in enumerate(readings)]
    return summarize(samples, duration_s=0.2, interval_s=0.1)


def stats(wall_s: float = 2.0) -> PartitionStats:
    return PartitionStats(model_source="/models/tiny", device="cpu", batch_size=4, samples=4, wall_s=wall_s,
                          model_load_s=0.5, telemetry=telemetry(),
                          generation={"max_new_tokens": 4, "seed": 0})


@pytest.fixture(scope="module")
def row() -> SummaryRow:
    return summary_row(GENERATIONS, SCORES, stats(), dataset="all")


def test_throughput_and_latency_percentiles(row):
    assert (row.samples, row.wall_s, row.model_load_s) == (4, 2.0, 0.5)
    assert row.samples_per_s == pytest.approx(2.0)  # 4 samples / 2 s
    assert row.generated_tokens_per_s == pytest.approx(5.0)  # 10 tokens / 2 s
    assert row.latency_avg_ms == pytest.approx(25.0)
    assert row.latency_p50_ms == pytest.approx(25.0)  # halfway between 20 and 30
    assert row.latency_p95_ms == pytest.approx(38.5)  # rank 0.95 * 3 = 2.85: 30 + 0.85 * 10


def test_pass_rates_and_averages(row):
    assert (row.pass_rate, row.manual_pass_rate) == (0.5, 0.5)
    assert row.manual_false_passes == 1  # row 2: the manual check passes it, the reward does not
    assert row.average_reward == pytest.approx(0.275)
    assert (row.verifier_avg, row.grounding_avg, row.cost_avg) == pytest.approx((0.375, 0.5, 0.875))
    assert row.format_avg == pytest.approx(0.675)
    assert row.anls_avg == pytest.approx(0.6)  # missing values are skipped, not zeros
    assert row.relaxed_accuracy_avg == pytest.approx(0.5)
    assert row.accuracy == 0.5


def test_one_row_per_dataset_with_its_share_of_the_wall_time():
    """Rows 0-2 are docvqa, row 3 easy_vqa; batches of 2 took 300 ms and 100 ms; the partition took 2 s."""
    generations = GENERATIONS.assign(sample_id=list("abcd"), dataset=["docvqa", "docvqa", "docvqa", "easy_vqa"],
                                     batch_index=[0, 0, 1, 1], batch_latency_ms=[300.0, 300.0, 100.0, 100.0])
    scores = SCORES.assign(sample_id=list("abcd"))
    docs, easy = summary_rows(generations, scores, stats(wall_s=2.0))
    assert (docs.dataset, docs.samples, docs.accuracy, docs.pass_rate) == ("docvqa", 3, 2 / 3, 2 / 3)
    assert (easy.dataset, easy.samples, easy.accuracy, easy.pass_rate) == ("easy_vqa", 1, 0.0, 0.0)
    # raw shares 150 + 150 + 50 = 350 ms and 50 ms, scaled to 2 s: 1.75 s and 0.25 s
    assert (docs.wall_s, easy.wall_s) == pytest.approx((1.75, 0.25))
    assert docs.samples_per_s == pytest.approx(3 / 1.75)
    assert easy.latency_p50_ms == 40.0 and docs.latency_p50_ms == 20.0


def test_verifier_metric_agreement(row):
    # metric says right, right, wrong, wrong; verifier (>= 0.5) says right, right, wrong, right
    assert row.verifier_metric_agreement == pytest.approx(0.75)
    assert verifier_metric_agreement(SCORES.assign(anls=None, relaxed_accuracy=None)) is None


def test_telemetry_columns_come_from_the_sampler_summary(row):
    assert row.gpu_seen is True
    assert (row.gpu_util_avg, row.gpu_util_max) == (60.0, 70.0)
    assert (row.gpu_memory_avg_mb, row.gpu_memory_max_mb) == (2000.0, 3000.0)
    assert row.gpu_power_avg_w == 150.0
    assert (row.cpu_percent_avg, row.rss_max_mb, row.peak_memory_mb) == (100.0, 600.0, 600.0)
    assert (row.model_source, row.device) == ("/models/tiny", "cpu")
    assert row.created_at.tzinfo is not None


def test_zero_wall_time_gives_no_rate_instead_of_dividing_by_zero():
    row = summary_row(GENERATIONS, SCORES, stats(wall_s=0.0), dataset="all")
    assert row.samples_per_s is None and row.generated_tokens_per_s is None
    assert not math.isnan(row.latency_p95_ms)


def test_without_telemetry_the_telemetry_columns_are_empty():
    unmeasured = PartitionStats(model_source="/m", device="cpu", batch_size=4, samples=4, wall_s=2.0,
                                model_load_s=0.5, telemetry=None, generation={})
    row = summary_row(GENERATIONS, SCORES, unmeasured, dataset="all")
    assert row.gpu_seen is False
    assert (row.peak_memory_mb, row.gpu_util_avg, row.cpu_percent_avg, row.rss_max_mb) == (None, None, None, None)
    assert row.samples == 4
