import time

import pytest
import torch

from aerorl_ops.telemetry import (
    PEAK_FROM_PROCESS_RSS,
    PEAK_FROM_TORCH_CUDA,
    GpuReading,
    ProcessReading,
    TelemetrySampler,
)

HOUR = 3600.0  # an interval the test never reaches, so only explicit samples are taken


class ScriptedGpuReader:
    def __init__(self, script):
        self.script = list(script)
        self.reads = 0

    def read(self):
        readings = self.script[min(self.reads, len(self.script) - 1)]
        self.reads += 1
        return readings


class ScriptedProcessReader:
    def __init__(self, script):
        self.script = list(script)
        self.reads = 0

    def read(self):
        reading = self.script[min(self.reads, len(self.script) - 1)]
        self.reads += 1
        return reading


class BrokenGpuReader:
    def read(self):
        raise OSError("device fell off the bus")


def a100(util, memory, power):
    return GpuReading(index=0, name="Fake A100", utilization_pct=util, memory_used_mb=memory, power_w=power)


def test_sampler_without_gpu_records_real_process_telemetry():
    with TelemetrySampler(interval_s=0.02) as sampler:
        ballast = bytearray(64 * 1024 * 1024)  # keep RSS visibly above zero
        deadline = time.perf_counter() + 0.3
        while time.perf_counter() < deadline:
            pass
    summary = sampler.summary()

    assert len(ballast) == 64 * 1024 * 1024
    assert summary.gpu_seen is False
    assert summary.gpu_names == ()
    assert summary.gpu_util_avg_pct is None and summary.gpu_power_max_w is None
    assert summary.torch_peak_allocated_mb is None
    assert summary.sample_count == len(sampler.samples) >= 3
    assert summary.sampling_duration_s >= 0.3
    assert summary.rss_max_mb > 64
    assert 0 < summary.rss_avg_mb <= summary.rss_max_mb
    assert summary.cpu_max_pct > 20  # the block kept one core busy
    assert summary.peak_memory_mb == summary.rss_max_mb
    assert summary.peak_memory_source == PEAK_FROM_PROCESS_RSS
    elapsed = [sample.elapsed_s for sample in sampler.samples]
    assert elapsed == sorted(elapsed)
    assert all(sample.gpus == () for sample in sampler.samples)


def test_sampler_aggregates_fake_gpu_readings():
    gpu_reader = ScriptedGpuReader(
        [[a100(10.0, 1000.0, 50.0)], [a100(50.0, 3000.0, 250.0)], [a100(30.0, 2000.0, None)]]
    )
    process_reader = ScriptedProcessReader(
        [ProcessReading(100.0, 25.0), ProcessReading(400.0, 75.0), ProcessReading(250.0, 50.0)]
    )

    with TelemetrySampler(interval_s=HOUR, gpu_reader=gpu_reader, process_reader=process_reader) as sampler:
        sampler.sample_now()
        sampler.sample_now()
    summary = sampler.summary()  # the third sample is the one taken on exit

    assert summary.sample_count == 3
    assert summary.gpu_seen is True
    assert summary.gpu_names == ("Fake A100",)
    assert summary.gpu_util_avg_pct == pytest.approx(30.0)
    assert summary.gpu_util_max_pct == 50.0
    assert summary.gpu_memory_avg_mb == pytest.approx(2000.0)
    assert summary.gpu_memory_max_mb == 3000.0
    assert summary.gpu_power_avg_w == pytest.approx(150.0)
    assert summary.gpu_power_max_w == 250.0
    assert summary.rss_avg_mb == pytest.approx(250.0)
    assert summary.rss_max_mb == 400.0
    assert summary.cpu_avg_pct == pytest.approx(50.0)
    assert summary.cpu_max_pct == 75.0
    assert summary.peak_memory_mb == 400.0
    assert [sample.gpus[0].utilization_pct for sample in sampler.samples] == [10.0, 50.0, 30.0]


def test_background_thread_samples_on_its_interval():
    gpu_reader = ScriptedGpuReader([[a100(10.0, 1000.0, 50.0)]])
    with TelemetrySampler(interval_s=0.02, gpu_reader=gpu_reader) as sampler:
        time.sleep(0.3)
    assert sampler.summary().sample_count == gpu_reader.reads >= 4


def test_cuda_device_adds_torch_peaks(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device: calls.append(("reset", device)))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device: 3 * 1024 * 1024 * 1024)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda device: 4 * 1024 * 1024 * 1024)
    process_reader = ScriptedProcessReader([ProcessReading(500.0, 10.0)])

    sampler = TelemetrySampler(
        interval_s=HOUR, device="cuda:0", gpu_reader=ScriptedGpuReader([[]]), process_reader=process_reader
    )
    with sampler:
        assert calls == [("reset", torch.device("cuda:0"))]
    summary = sampler.summary()

    assert summary.torch_peak_allocated_mb == 3072.0
    assert summary.torch_peak_reserved_mb == 4096.0
    assert summary.peak_memory_mb == 3072.0
    assert summary.peak_memory_source == PEAK_FROM_TORCH_CUDA


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised without CUDA")
def test_cuda_device_without_cuda_is_an_error():
    with pytest.raises(ValueError, match="cuda:0"):
        with TelemetrySampler(device=torch.device("cuda:0")):
            pass


def test_reader_failure_on_thread_is_raised_on_exit():
    sampler = TelemetrySampler(interval_s=0.01, gpu_reader=BrokenGpuReader())
    with pytest.raises(RuntimeError, match="device fell off the bus"):
        with sampler:
            time.sleep(0.1)
    with pytest.raises(RuntimeError, match="once its `with` block has ended"):
        sampler.summary()


def test_block_error_wins_over_reader_failure():
    with pytest.raises(KeyError) as caught:
        with TelemetrySampler(interval_s=0.01, gpu_reader=BrokenGpuReader()):
            time.sleep(0.1)
            raise KeyError("model_key")
    assert any("device fell off the bus" in note for note in caught.value.__notes__)


def test_sampler_is_single_use_and_validates_interval():
    with pytest.raises(ValueError, match="interval_s must be positive"):
        TelemetrySampler(interval_s=0)
    sampler = TelemetrySampler(interval_s=HOUR, gpu_reader=ScriptedGpuReader([[]]))
    with pytest.raises(RuntimeError, match="summary"):
        sampler.summary()
    with sampler:
        pass
    with pytest.raises(RuntimeError, match="single-use"):
        with sampler:
            pass
    with pytest.raises(RuntimeError, match="inside its `with` block"):
        sampler.sample_now()
