"""A stop asked for by a signal, honoured at the next safe point of long work.

Ctrl-C or ``kill`` used to land in the middle of a step: the step died with a trace hundreds of lines
long and nobody said what was saved. Now the command's signal handler only calls :func:`request_stop`;
long work calls :func:`stop_here` where stopping loses nothing (a training step recorded, a benchmark
partition written, an eval setting done), which raises :class:`StopRequested` with a line that says
where it stopped and how to go on. The request is process-wide, as the signal that makes it is.

>>> request_stop(2); stop_requested()
2
>>> try:
...     stop_here("interrupted after step 3 of 8")
... except StopRequested as stop:
...     print(stop, stop.exit_code)
interrupted after step 3 of 8 130
>>> clear_stop(); stop_here("not raised")
"""

from __future__ import annotations

_requested: list[int] = []
"""The signal numbers received since the last :func:`clear_stop` (a list: appending needs no lock)."""


class StopRequested(Exception):
    """Work stopped at a safe point on a signal; the message says where, and how to go on."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """The shell's code for a process ended by the signal: 128 + its number (130 SIGINT, 143 SIGTERM)."""
        return 128 + self.signum


def request_stop(signum: int) -> None:
    """Ask long work in this process to stop at its next safe point (call it from a signal handler)."""
    _requested.append(signum)


def stop_requested() -> int | None:
    """The first signal that asked for a stop, or None."""
    return _requested[0] if _requested else None


def clear_stop() -> None:
    """Forget the requests (a command starts with none)."""
    _requested.clear()


def stop_here(message: str) -> None:
    """Raise :class:`StopRequested` with ``message`` when a stop was asked for; else nothing."""
    signum = stop_requested()
    if signum is not None:
        raise StopRequested(message, signum)
