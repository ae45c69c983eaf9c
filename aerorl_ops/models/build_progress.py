"""What a one-time model build says while it runs: a line on the terminal and in the build log, a step bar.

A first ``aerorl bench`` builds the trained embedded model; without a word the terminal would sit
still for the build's duration. A build reports through :data:`BUILD_LOG` (a plain ``logging``
logger: a Dagster step forwards it to its run log, ``assets.resources``) and writes its lines and
its step bar to standard error, where a person at the terminal sees them.

    >>> with step_bar(3, "example", log_every=0) as advance:
    ...     for _ in range(3):
    ...         advance()
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout
from tqdm import tqdm

BUILD_LOG = logging.getLogger("aerorl_ops.models.build")
LOG_EVERY_STEPS = 50
"""How often a build's step count goes to the build log (the terminal has the bar)."""


def say(text: str) -> None:
    """One build line: on standard error (above any bar) and in the build log."""
    tqdm.write(text, file=sys.stderr)
    BUILD_LOG.info(text)


@contextmanager
def step_bar(total: int, desc: str, log_every: int = LOG_EVERY_STEPS) -> Iterator[Callable[[], None]]:
    """A step bar on standard error for ``total`` steps; yields the call that advances it by one.
    Every ``log_every`` steps (0: never) the count also goes to the build log."""
    done = 0
    with tqdm(total=total, desc=desc, unit="step", file=sys.stderr, mininterval=1.0) as bar:
        def advance() -> None:
            nonlocal done
            done += 1
            bar.update(1)
            if log_every and (done % log_every == 0 or done == total):
                BUILD_LOG.info("%s: step %d of %d", desc, done, total)

        yield advance


@contextmanager
def build_lock(lock_path: Path, what: str) -> Iterator[None]:
    """Hold ``lock_path``; when another process holds it, say that this one waits for its build of ``what``."""
    lock = FileLock(lock_path)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        say(f"waiting for another process to finish building {what} (lock {lock_path})")
        lock.acquire()
    try:
        yield
    finally:
        lock.release()
