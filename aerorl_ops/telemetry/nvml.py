"""GPU readings through NVML (the library behind nvidia-smi), without shelling out.

:class:`NvmlReader` is the real reader; anything with a ``read() -> list[GpuReading]``
method (the :class:`GpuReader` protocol) can stand in for it, which is how tests
exercise the GPU path on machines without one.

Which devices are read: every NVML device, or, when ``CUDA_VISIBLE_DEVICES`` is set
(read when the reader opens, never at import), the ones it names by index or by full
``GPU-...`` UUID. Parsing stops at the first entry it cannot map (as CUDA does), so
MIG identifiers and UUID prefixes select nothing from there on. Indices are NVML's
(PCI bus) order, which matches CUDA's order only under ``CUDA_DEVICE_ORDER=PCI_BUS_ID``.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import NamedTuple, Protocol

_BYTES_PER_MIB = 1024 * 1024


class GpuReading(NamedTuple):
    """One device at one instant. ``None`` means the driver does not report the value."""

    index: int  # NVML index
    name: str
    utilization_pct: float | None  # 0-100, share of the last sample period a kernel ran
    memory_used_mb: float | None  # MiB used on the device by all processes
    power_w: float | None  # board power draw in watts


class GpuReader(Protocol):
    def read(self) -> list[GpuReading]: ...


class NullGpuReader:
    """The reader used when no GPU can be seen: every read is empty."""

    def read(self) -> list[GpuReading]:
        return []

    def close(self) -> None:
        return None


def parse_visible_devices(value: str | None) -> list[int | str] | None:
    """Entries of a ``CUDA_VISIBLE_DEVICES`` value: ints for indices, strings for UUIDs.

    ``None`` (variable unset) means all devices; ``""`` means none. Parsing stops at the
    first entry that is neither a non-negative index nor a ``GPU-`` UUID.

    >>> parse_visible_devices("1, 0")
    [1, 0]
    >>> parse_visible_devices("0,GPU-8f3a,MIG-1,2")
    [0, 'GPU-8f3a']
    >>> parse_visible_devices(None) is None
    True
    """
    if value is None:
        return None
    entries: list[int | str] = []
    for raw in value.split(","):
        entry = raw.strip()
        if entry.isdigit():
            entries.append(int(entry))
        elif entry.startswith("GPU-"):
            entries.append(entry)
        else:
            break
    return entries


class NvmlReader:
    """Reads utilisation, memory and power of the visible NVIDIA devices through NVML.

    ``NvmlReader.open()`` never raises for a missing driver or library: it returns a
    :class:`NullGpuReader` instead, so callers on CPU-only machines need no special case.
    Call :meth:`close` (or use it as a context manager) to shut NVML down.
    """

    def __init__(self, nvml: ModuleType, handles: list[tuple[int, str, object]]) -> None:
        self._nvml = nvml
        self._handles = handles  # (nvml index, name, handle)
        self._closed = False

    @classmethod
    def open(
        cls, nvml: ModuleType | None = None, visible_devices: str | None = None
    ) -> NvmlReader | NullGpuReader:
        """Initialise NVML and resolve the visible devices.

        nvml: the ``pynvml`` module, or a stand-in with the same functions (tests).
        visible_devices: a ``CUDA_VISIBLE_DEVICES`` value; by default the current one.
        """
        if nvml is None:
            import pynvml as nvml
        if visible_devices is None:
            visible_devices = os.environ.get("CUDA_VISIBLE_DEVICES")
        try:
            nvml.nvmlInit()
        except (nvml.NVMLError, OSError):
            return NullGpuReader()
        try:
            handles = _resolve_handles(nvml, parse_visible_devices(visible_devices))
        except nvml.NVMLError:
            nvml.nvmlShutdown()
            raise
        if not handles:
            nvml.nvmlShutdown()
            return NullGpuReader()
        return cls(nvml, handles)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for _, name, _ in self._handles)

    def read(self) -> list[GpuReading]:
        if self._closed:
            raise RuntimeError("NvmlReader.read() called after close(); open a new reader")
        nvml = self._nvml
        readings = []
        for index, name, handle in self._handles:
            utilization = _or_none(nvml, lambda device: nvml.nvmlDeviceGetUtilizationRates(device).gpu, handle)
            memory_used = _or_none(nvml, lambda device: nvml.nvmlDeviceGetMemoryInfo(device).used, handle)
            power_mw = _or_none(nvml, nvml.nvmlDeviceGetPowerUsage, handle)
            readings.append(
                GpuReading(
                    index=index,
                    name=name,
                    utilization_pct=None if utilization is None else float(utilization),
                    memory_used_mb=None if memory_used is None else memory_used / _BYTES_PER_MIB,
                    power_w=None if power_mw is None else power_mw / 1000.0,
                )
            )
        return readings

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._nvml.nvmlShutdown()

    def __enter__(self) -> NvmlReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _resolve_handles(nvml: ModuleType, visible: list[int | str] | None) -> list[tuple[int, str, object]]:
    count = nvml.nvmlDeviceGetCount()
    if visible is None:
        visible = list(range(count))
    by_uuid: dict[str, int] | None = None
    indices: list[int] = []
    for entry in visible:
        if isinstance(entry, int):
            if entry >= count:
                break
            indices.append(entry)
            continue
        if by_uuid is None:
            by_uuid = {_text(nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(i))): i for i in range(count)}
        if entry not in by_uuid:
            break
        indices.append(by_uuid[entry])
    handles = []
    for index in dict.fromkeys(indices):  # each device once, in the order given
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        handles.append((index, _text(nvml.nvmlDeviceGetName(handle)), handle))
    return handles


def _or_none(nvml: ModuleType, read, handle: object):
    """``read(handle)``, or None when the driver reports the value as unsupported or unavailable."""
    try:
        return read(handle)
    except nvml.NVMLError:
        return None


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
