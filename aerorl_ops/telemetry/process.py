"""Resident memory and CPU use of one process, through psutil."""

from __future__ import annotations

from typing import NamedTuple

import psutil

_BYTES_PER_MIB = 1024 * 1024


class ProcessReading(NamedTuple):
    rss_mb: float  # resident set size in MiB
    cpu_pct: float  # CPU use since the previous read; 100 = one core fully busy


class ProcessReader:
    """Reads RSS and CPU% of a process (by default this one).

    psutil measures CPU% between two calls, so the reader takes a priming measurement
    when built; the first :meth:`read` then covers the time since construction.
    """

    def __init__(self, pid: int | None = None) -> None:
        self._process = psutil.Process(pid)
        self._process.cpu_percent(interval=None)

    def read(self) -> ProcessReading:
        with self._process.oneshot():
            rss = self._process.memory_info().rss
            cpu = self._process.cpu_percent(interval=None)
        return ProcessReading(rss_mb=rss / _BYTES_PER_MIB, cpu_pct=float(cpu))
