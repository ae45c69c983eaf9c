"""Known third-party log lines, kept to what a person needs to read: each at most a fixed number of
times per process.

Both come from bitsandbytes, through ``logging`` (not ``warnings``, so Python's once-per-location
rule never applied to them):

- ``MatMul8bitLt: inputs will be cast from torch.float32 to float16 during quantization`` is logged on
  every forward of every int8 layer of the quantized reference (665 lines in a default
  ``aerorl train``). Once is enough: the cast is the same each time.
- ``Failed to load CPU gemm_4bit_forward from kernels-community`` is logged when bitsandbytes is
  imported: an optional CPU kernel fetched from the model hub, which this project never uses; the
  plain CPU path it falls back to is the one the project runs. Never shown.

transformers' own progress bars (``Loading weights``, ``Writing model shards``: one pair per load and
per checkpoint) are turned off too: a run shows its own progress, not its files'.

The filters only decide what is printed; nothing computed changes. Call :func:`quiet_known_logs` at a
process's entry point, before bitsandbytes is imported (it logs the second line while importing).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class KnownLine:
    """A third-party log line: its logger, how its message starts, and how often it may be shown."""

    logger: str
    starts_with: str
    times: int  # per process; 0: never


KNOWN_LINES = (
    KnownLine("bitsandbytes.autograd._functions", "MatMul8bitLt: inputs will be cast", 1),
    KnownLine("bitsandbytes.backends.cpu.ops", "Failed to load CPU gemm_4bit_forward from kernels-community", 0),
)


class AtMostFilter(logging.Filter):
    """Lets ``line`` through its first ``line.times`` times, then drops it; other records pass."""

    def __init__(self, line: KnownLine) -> None:
        super().__init__()
        self.line = line
        self.shown = 0
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(self.line.starts_with):
            return True
        with self._lock:
            self.shown += 1
            return self.shown <= self.line.times


def quiet_known_logs(lines: tuple[KnownLine, ...] = KNOWN_LINES) -> None:
    """Install one :class:`AtMostFilter` per known line on its logger (calling again adds none), and
    turn transformers' file progress bars off."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    for line in lines:
        logger = logging.getLogger(line.logger)
        if not any(isinstance(existing, AtMostFilter) and existing.line == line for existing in logger.filters):
            logger.addFilter(AtMostFilter(line))
