"""Seconds of an RL step's phases (rollout, scoring, updates), each mark taken once the device is done."""

from __future__ import annotations

import time

import torch


class PhaseClock:
    """``mark(name)`` records the seconds since the previous mark (or the clock's start) under ``name``, after
    waiting for ``device`` (its queued kernels belong to the phase that queued them).

    >>> clock = PhaseClock(torch.device("cpu")); clock.mark("rollout_s"); sorted(clock.seconds)
    ['rollout_s']
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.seconds: dict[str, float] = {}
        self._last = self._now()

    def _now(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def mark(self, name: str) -> None:
        now = self._now()
        self.seconds[name] = now - self._last
        self._last = now
