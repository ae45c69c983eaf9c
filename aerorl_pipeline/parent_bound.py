"""Run a command that dies with the process that started it: ``python -m aerorl_pipeline.parent_bound PID -- COMMAND``.

`aerorl bench` starts its local Celery workers in sessions of their own (a Ctrl-C at the terminal is the bench's
to handle). A bench killed with SIGKILL stops nothing, so its workers went on serving the folder broker's queues,
every one of them, for good: a chaos run found a report writer and partition workers of each killed start still
running, and the next start's workers beside them. Here the kernel is asked (Linux's ``PR_SET_PDEATHSIG``) to send
the command SIGKILL when its parent, ``PID``, ends, and the command then replaces this process (``exec``), which
keeps that request. Elsewhere than on Linux the command runs as it is.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def bound_command(parent: int, command: list[str]) -> list[str]:
    """``command``, run so that it dies with process ``parent`` (module docstring).

    >>> bound_command(7, ["celery", "worker"])[-4:]
    ['7', '--', 'celery', 'worker']
    """
    return [sys.executable, "-m", __name__, str(parent), "--", *command]


def die_with_parent(parent: int) -> bool:
    """Ask for SIGKILL when the parent ends; False when ``parent`` is already gone (this process was adopted)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    return os.getppid() == parent


def main(argv: list[str]) -> int:
    parent, separator, *command = argv
    if separator != "--" or not command:
        print("usage: python -m aerorl_pipeline.parent_bound PID -- COMMAND [ARGS]", file=sys.stderr)
        return 2
    if not die_with_parent(int(parent)):
        return 1  # the parent died before the request was made: nobody owns this command now
    os.execvp(command[0], command)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
