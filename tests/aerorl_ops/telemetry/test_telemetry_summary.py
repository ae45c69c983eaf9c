import pytest

from aerorl_ops.telemetry import (
    PEAK_FROM_PROCESS_RSS,
    PEAK_FROM_TORCH_CUDA,
    GpuReading,
    TelemetrySample,
    TelemetrySummary,
    summarize,
)

RECORD_COLUMNS = (
    "gpu_seen",
    "gpu_count",
    "gpu_names",
    "sample_count",
    "sampling_duration_s",
    "sampling_interval_s",
    "gpu_util_avg_pct",
    "gpu_util_max_pct",
    "gpu_memory_avg_mb",
    "gpu_memory_max_mb",
    "gpu_power_avg_w",
    "gpu_power_max_w",
    "torch_peak_allocated_mb",
    "torch_peak_reserved_mb",
    "rss_avg_mb",
    "rss_max_mb",
    "cpu_avg_pct",
    "cpu_max_pct",
    "peak_memory_mb",
    "peak_memory_source",
)


def gpu(index, util, memory, power):
    return GpuReading(index=index, name=f"GPU {index}", utilization_pct=util, memory_used_mb=memory, power_w=power)


# Two devices, three samples. Per sample: utilisation is the device mean, memory and power
# are device sums, and a sum with an unknown device is unknown.
#   sample   util (mean)       memory (sum)        power (sum)
#   1        20,40  -> 30      1000+3000 -> 4000   100+200  -> 300
#   2        80,100 -> 90      2000+4000 -> 6000   150+None -> None
#   3        60,60  -> 60      1500+1500 -> 3000   250+250  -> 500
SAMPLES = [
    TelemetrySample(0.1, rss_mb=100.0, cpu_pct=50.0, gpus=(gpu(0, 20.0, 1000.0, 100.0), gpu(1, 40.0, 3000.0, 200.0))),
    TelemetrySample(0.2, rss_mb=300.0, cpu_pct=150.0, gpus=(gpu(0, 80.0, 2000.0, 150.0), gpu(1, 100.0, 4000.0, None))),
    TelemetrySample(0.3, rss_mb=200.0, cpu_pct=10.0, gpus=(gpu(0, 60.0, 1500.0, 250.0), gpu(1, 60.0, 1500.0, 250.0))),
]


def test_summary_aggregates_hand_checked_values():
    summary = summarize(SAMPLES, duration_s=0.35, interval_s=0.1)

    assert summary.gpu_seen is True
    assert summary.gpu_count == 2
    assert summary.gpu_names == ("GPU 0", "GPU 1")
    assert summary.sample_count == 3
    assert summary.gpu_util_avg_pct == pytest.approx(60.0)
    assert summary.gpu_util_max_pct == 90.0
    assert summary.gpu_memory_avg_mb == pytest.approx(13000.0 / 3)
    assert summary.gpu_memory_max_mb == 6000.0
    assert summary.gpu_power_avg_w == pytest.approx(400.0)
    assert summary.gpu_power_max_w == 500.0
    assert summary.rss_avg_mb == pytest.approx(200.0)
    assert summary.rss_max_mb == 300.0
    assert summary.cpu_avg_pct == pytest.approx(70.0)
    assert summary.cpu_max_pct == 150.0
    assert summary.torch_peak_allocated_mb is None
    assert summary.peak_memory_mb == 300.0
    assert summary.peak_memory_source == PEAK_FROM_PROCESS_RSS


def test_torch_peak_takes_over_peak_memory():
    summary = summarize(
        SAMPLES, duration_s=0.35, interval_s=0.1, torch_peak_allocated_mb=1234.5, torch_peak_reserved_mb=2048.0
    )
    assert summary.peak_memory_mb == 1234.5
    assert summary.peak_memory_source == PEAK_FROM_TORCH_CUDA
    assert summary.torch_peak_reserved_mb == 2048.0


def test_no_gpu_samples_leave_gpu_columns_none():
    samples = [TelemetrySample(0.1, 100.0, 20.0, ()), TelemetrySample(0.2, 110.0, 40.0, ())]
    record = summarize(samples, duration_s=0.2, interval_s=0.1).as_record()
    assert record["gpu_seen"] is False
    assert record["gpu_count"] == 0
    assert record["gpu_names"] == ""
    for column in ("gpu_util_avg_pct", "gpu_util_max_pct", "gpu_memory_avg_mb", "gpu_power_max_w"):
        assert record[column] is None
    assert record["rss_avg_mb"] == pytest.approx(105.0)


def test_as_record_is_flat_with_stable_columns():
    record = summarize(SAMPLES, duration_s=0.35, interval_s=0.1).as_record()
    assert tuple(record) == RECORD_COLUMNS == TelemetrySummary.column_names()
    assert record["gpu_names"] == "GPU 0, GPU 1"
    assert record["sampling_duration_s"] == 0.35
    assert all(value is None or isinstance(value, (bool, int, float, str)) for value in record.values())


def test_summary_is_frozen():
    summary = summarize(SAMPLES, duration_s=0.35, interval_s=0.1)
    with pytest.raises(AttributeError):
        summary.sample_count = 0


def test_summarize_rejects_no_samples():
    with pytest.raises(ValueError, match="at least one TelemetrySample"):
        summarize([], duration_s=1.0, interval_s=0.2)


def test_a_record_turns_back_into_the_same_summary():
    summary = summarize(SAMPLES, duration_s=0.35, interval_s=0.1, torch_peak_allocated_mb=12.5)
    assert TelemetrySummary.from_record(summary.as_record()) == summary
    no_gpu = summarize([TelemetrySample(0.1, 100.0, 20.0, ())], duration_s=0.1, interval_s=0.1)
    assert TelemetrySummary.from_record(no_gpu.as_record()).gpu_names == ()


def test_a_record_with_missing_columns_is_refused():
    record = summarize(SAMPLES, duration_s=0.35, interval_s=0.1).as_record()
    del record["rss_max_mb"]
    with pytest.raises(ValueError, match="exactly the columns"):
        TelemetrySummary.from_record(record)


def test_samples_are_frozen_records():
    with pytest.raises(AttributeError):
        SAMPLES[0].rss_mb = 0.0
