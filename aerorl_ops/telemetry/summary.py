"""Telemetry samples and the summary a benchmark run stores next to its results.

Per sample, the visible GPUs are combined into one value each: utilisation is the mean
over devices, memory and power are sums (what the job as a whole uses and draws). A
combined value is ``None`` when any device did not report it. The summary then takes
the average and the maximum of each combined value over the samples that have it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import fmean

from aerorl_ops.telemetry.nvml import GpuReading

PEAK_FROM_TORCH_CUDA = "torch_cuda_max_allocated"
PEAK_FROM_PROCESS_RSS = "process_rss"


@dataclass(frozen=True, slots=True)
class TelemetrySample:
    """What the sampler read at one instant."""

    elapsed_s: float  # seconds since the sampler started
    rss_mb: float
    cpu_pct: float  # 100 = one core fully busy
    gpus: tuple[GpuReading, ...]  # empty when no GPU is seen

    @property
    def gpu_utilization_pct(self) -> float | None:
        values = [gpu.utilization_pct for gpu in self.gpus]
        return None if not values or None in values else fmean(values)

    @property
    def gpu_memory_used_mb(self) -> float | None:
        values = [gpu.memory_used_mb for gpu in self.gpus]
        return None if not values or None in values else sum(values)

    @property
    def gpu_power_w(self) -> float | None:
        values = [gpu.power_w for gpu in self.gpus]
        return None if not values or None in values else sum(values)


@dataclass(frozen=True)
class TelemetrySummary:
    """What a sampler saw over one ``with`` block. ``None`` = not measured on this machine.

    ``peak_memory_mb`` is torch's peak allocated CUDA memory when the sampler watched a
    CUDA device, otherwise the maximum process RSS; ``peak_memory_source`` says which.
    """

    gpu_seen: bool
    gpu_count: int
    gpu_names: tuple[str, ...]
    sample_count: int
    sampling_duration_s: float
    sampling_interval_s: float
    gpu_util_avg_pct: float | None
    gpu_util_max_pct: float | None
    gpu_memory_avg_mb: float | None
    gpu_memory_max_mb: float | None
    gpu_power_avg_w: float | None
    gpu_power_max_w: float | None
    torch_peak_allocated_mb: float | None
    torch_peak_reserved_mb: float | None
    rss_avg_mb: float
    rss_max_mb: float
    cpu_avg_pct: float
    cpu_max_pct: float
    peak_memory_mb: float
    peak_memory_source: str

    @classmethod
    def column_names(cls) -> tuple[str, ...]:
        """Keys of :meth:`as_record`, in order."""
        return tuple(field.name for field in dataclasses.fields(cls))

    def as_record(self) -> dict[str, float | int | str | bool | None]:
        """Flat snake_case columns; ``gpu_names`` becomes one comma-separated string."""
        record = {name: getattr(self, name) for name in self.column_names()}
        record["gpu_names"] = ", ".join(self.gpu_names)
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, object]) -> TelemetrySummary:
        """The summary back from :meth:`as_record`'s columns (as stored in JSON).

        >>> summary = summarize([TelemetrySample(0.1, 100.0, 20.0, ())], duration_s=0.1, interval_s=0.1)
        >>> TelemetrySummary.from_record(summary.as_record()) == summary
        True
        """
        if set(record) != set(cls.column_names()):
            raise ValueError(f"a telemetry record needs exactly the columns {cls.column_names()}; "
                             f"got {tuple(record)}")
        names = str(record["gpu_names"])
        return cls(**{**record, "gpu_names": tuple(names.split(", ")) if names else ()})


def summarize(
    samples: list[TelemetrySample],
    *,
    duration_s: float,
    interval_s: float,
    torch_peak_allocated_mb: float | None = None,
    torch_peak_reserved_mb: float | None = None,
) -> TelemetrySummary:
    """Aggregate samples into a :class:`TelemetrySummary` (see the module docstring)."""
    if not samples:
        raise ValueError("summarize() needs at least one TelemetrySample; the sampler recorded none")
    names_by_index = {gpu.index: gpu.name for sample in samples for gpu in sample.gpus}
    util_avg, util_max = _avg_max([s.gpu_utilization_pct for s in samples])
    memory_avg, memory_max = _avg_max([s.gpu_memory_used_mb for s in samples])
    power_avg, power_max = _avg_max([s.gpu_power_w for s in samples])
    rss = [s.rss_mb for s in samples]
    cpu = [s.cpu_pct for s in samples]
    if torch_peak_allocated_mb is None:
        peak_memory_mb, peak_source = max(rss), PEAK_FROM_PROCESS_RSS
    else:
        peak_memory_mb, peak_source = torch_peak_allocated_mb, PEAK_FROM_TORCH_CUDA
    return TelemetrySummary(
        gpu_seen=bool(names_by_index),
        gpu_count=len(names_by_index),
        gpu_names=tuple(names_by_index.values()),
        sample_count=len(samples),
        sampling_duration_s=duration_s,
        sampling_interval_s=interval_s,
        gpu_util_avg_pct=util_avg,
        gpu_util_max_pct=util_max,
        gpu_memory_avg_mb=memory_avg,
        gpu_memory_max_mb=memory_max,
        gpu_power_avg_w=power_avg,
        gpu_power_max_w=power_max,
        torch_peak_allocated_mb=torch_peak_allocated_mb,
        torch_peak_reserved_mb=torch_peak_reserved_mb,
        rss_avg_mb=fmean(rss),
        rss_max_mb=max(rss),
        cpu_avg_pct=fmean(cpu),
        cpu_max_pct=max(cpu),
        peak_memory_mb=peak_memory_mb,
        peak_memory_source=peak_source,
    )


def _avg_max(values: list[float | None]) -> tuple[float | None, float | None]:
    known = [value for value in values if value is not None]
    if not known:
        return None, None
    return fmean(known), max(known)
