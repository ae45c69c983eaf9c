"""A background thread that samples GPU and process telemetry while a block runs.

    with TelemetrySampler(interval_s=0.2, device=torch.device("cuda")) as sampler:
        run_benchmark()
    summary = sampler.summary()  # a TelemetrySummary; .as_record() gives flat columns

A sample is taken every ``interval_s`` seconds and once more when the block ends, so
even a block shorter than one interval yields one sample. On a CUDA device, torch's
peak-memory counters are reset on entry and read on exit.
"""

from __future__ import annotations

import threading
import time

import torch

from aerorl_ops.telemetry.nvml import GpuReader, NvmlReader
from aerorl_ops.telemetry.process import ProcessReader
from aerorl_ops.telemetry.summary import TelemetrySample, TelemetrySummary, summarize

_BYTES_PER_MIB = 1024 * 1024


class TelemetrySampler:
    """Samples GPU utilisation/memory/power, process RSS and CPU% on a background thread.

    interval_s: seconds between samples.
    device: the torch device the work runs on; a CUDA device adds torch's peak
        allocated/reserved memory to the summary.
    gpu_reader: anything with ``read() -> list[GpuReading]``; by default an NVML reader
        opened on entry (an empty reader when NVML is unavailable) and closed on exit.
    process_reader: by default a :class:`ProcessReader` for this process, built on entry.

    A sampler is single-use: one ``with`` block, then :meth:`summary`.
    """

    def __init__(
        self,
        interval_s: float = 0.2,
        device: torch.device | str | None = None,
        gpu_reader: GpuReader | None = None,
        process_reader: ProcessReader | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"TelemetrySampler interval_s must be positive, got {interval_s}")
        self.interval_s = interval_s
        self.device = torch.device("cpu") if device is None else torch.device(device)
        self._gpu_reader = gpu_reader
        self._owns_gpu_reader = gpu_reader is None
        self._process_reader = process_reader
        self._samples: list[TelemetrySample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._start = 0.0
        self._summary: TelemetrySummary | None = None

    @property
    def samples(self) -> list[TelemetrySample]:
        """A copy of the samples taken so far, oldest first."""
        with self._lock:
            return list(self._samples)

    def sample_now(self) -> None:
        """Take a sample immediately, in addition to the periodic ones (only inside the block)."""
        if self._thread is None or self._stop.is_set():
            raise RuntimeError("TelemetrySampler.sample_now() only works inside its `with` block")
        self._record_sample()

    def summary(self) -> TelemetrySummary:
        if self._summary is None:
            raise RuntimeError("TelemetrySampler.summary() is available once its `with` block has ended")
        return self._summary

    def __enter__(self) -> TelemetrySampler:
        if self._thread is not None:
            raise RuntimeError("a TelemetrySampler is single-use; create a new one for each block")
        if self.device.type == "cuda":
            if not torch.cuda.is_available():
                raise ValueError(
                    f"TelemetrySampler was given device {self.device} but torch sees no CUDA device; "
                    "pass the device the work actually runs on"
                )
            torch.cuda.reset_peak_memory_stats(self.device)
        if self._process_reader is None:
            self._process_reader = ProcessReader()
        if self._gpu_reader is None:
            self._gpu_reader = NvmlReader.open()
        self._start = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="telemetry-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        self._stop.set()
        self._thread.join()
        try:
            if self._error is None:
                self._record_sample()
            duration_s = time.perf_counter() - self._start
            peak_allocated = peak_reserved = None
            if self.device.type == "cuda":
                peak_allocated = torch.cuda.max_memory_allocated(self.device) / _BYTES_PER_MIB
                peak_reserved = torch.cuda.max_memory_reserved(self.device) / _BYTES_PER_MIB
        finally:
            if self._owns_gpu_reader:
                self._gpu_reader.close()
        if self._error is not None:
            message = f"telemetry sampling failed on its background thread: {self._error!r}"
            if exc is not None:  # the block's own error matters more; keep it, mention ours
                exc.add_note(message)
                return
            raise RuntimeError(message) from self._error
        self._summary = summarize(
            self.samples,
            duration_s=duration_s,
            interval_s=self.interval_s,
            torch_peak_allocated_mb=peak_allocated,
            torch_peak_reserved_mb=peak_reserved,
        )

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval_s):
                self._record_sample()
        except Exception as error:  # re-raised on the caller's thread in __exit__
            self._error = error

    def _record_sample(self) -> None:
        with self._lock:  # readers keep state between reads (psutil's CPU%), so one at a time
            gpus = tuple(self._gpu_reader.read())
            process = self._process_reader.read()
            self._samples.append(
                TelemetrySample(
                    elapsed_s=time.perf_counter() - self._start,
                    rss_mb=process.rss_mb,
                    cpu_pct=process.cpu_pct,
                    gpus=gpus,
                )
            )
