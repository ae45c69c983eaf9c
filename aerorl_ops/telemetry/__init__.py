"""Telemetry sampled while a benchmark runs: GPU (via NVML), torch CUDA peaks, process RSS/CPU."""

from aerorl_ops.telemetry.nvml import GpuReader, GpuReading, NullGpuReader, NvmlReader, parse_visible_devices
from aerorl_ops.telemetry.process import ProcessReader, ProcessReading
from aerorl_ops.telemetry.sampler import TelemetrySampler
from aerorl_ops.telemetry.summary import (
    PEAK_FROM_PROCESS_RSS,
    PEAK_FROM_TORCH_CUDA,
    TelemetrySample,
    TelemetrySummary,
    summarize,
)

__all__ = [
    "PEAK_FROM_PROCESS_RSS",
    "PEAK_FROM_TORCH_CUDA",
    "GpuReader",
    "GpuReading",
    "NullGpuReader",
    "NvmlReader",
    "ProcessReader",
    "ProcessReading",
    "TelemetrySample",
    "TelemetrySampler",
    "TelemetrySummary",
    "parse_visible_devices",
    "summarize",
]
