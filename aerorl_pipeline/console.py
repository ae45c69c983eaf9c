"""What `aerorl bench`, `train` and `eval` show while a Dagster job runs inside them: one line per thing.

* A job's warnings (a stale lock taken over, a short held-out sample, leftovers removed) print as
  ``aerorl: <message>``, one line each, above any progress bar (:func:`console_job` gives a job the
  :func:`warning_lines` logger in place of Dagster's console logger, whose ``DEBUG``/``ERROR`` events
  print a step's whole trace). A failure is not printed here: the command prints its cause once
  (``aerorl_pipeline.failures``), and the trace stays in the run's Dagster log.
* :func:`interruptible` runs the job in a worker thread, so that SIGINT / SIGTERM reach the command's
  handler instead of Dagster's (which raises inside the step, wherever it is): the handler asks for a
  stop (``aerorl_ops.stop``), the work stops at its next safe point, and a second signal ends the
  process at once. Meanwhile the main thread watches the job's waits for pool slots
  (``aerorl_pipeline.slot_wait``): said after a few seconds, freed from a dead holder, ended by a stop
  or by the wait limit.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import dagster as dg
from tqdm import tqdm

from aerorl_ops.stop import clear_stop, request_stop, stop_requested
from aerorl_pipeline.slot_wait import SlotWait

T = TypeVar("T")
CONSOLE_LOGS = {"loggers": {"console": {}}}
"""Run config that turns the job's console logger (:func:`console_job`'s) on."""
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
WATCH_EVERY_S = 1.0
"""How often the main thread looks at the job's waits for pool slots."""


class _WarningLine(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno != logging.WARNING:
            return
        meta = getattr(record, "dagster_meta", None) or {}
        message = " ".join(str(meta.get("orig_message") or record.getMessage()).split())
        tqdm.write(f"aerorl: {message}", file=sys.stderr)


@dg.logger(description="A job's warnings as one line each on stderr; failures are the command's to print.")
def warning_lines(_: dg.InitLoggerContext) -> logging.Logger:
    logger = logging.Logger("aerorl.console", level=logging.WARNING)
    logger.addHandler(_WarningLine())
    return logger


def console_job(job: dg.JobDefinition) -> dg.JobDefinition:
    """``job`` with :func:`warning_lines` as its console logger (run it with :data:`CONSOLE_LOGS`)."""
    return job.with_logger_defs({"console": warning_lines})


def _ask_to_stop(signum: int, _frame: object) -> None:
    if stop_requested() is not None:  # the second signal: no more waiting
        print(f"aerorl: {signal.Signals(signum).name} again: stopping now", file=sys.stderr, flush=True)
        os._exit(128 + signum)
    request_stop(signum)
    tqdm.write(f"aerorl: {signal.Signals(signum).name} received: stopping after the step in hand "
               "(send it again to stop at once)", file=sys.stderr)


def interruptible(work: Callable[[], T], watch: SlotWait | None = None) -> T:
    """``work()`` in a worker thread while this (main) thread turns SIGINT and SIGTERM into a stop
    request and, with ``watch``, looks at the job's waits for pool slots; its result, or what it raised
    (what ended a wait, when the watch ended one)."""
    clear_stop()
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as error:  # handed to the caller's thread as it was
            outcome["error"] = error

    previous = {number: signal.signal(number, _ask_to_stop) for number in STOP_SIGNALS}
    worker = threading.Thread(target=run, name="aerorl-job", daemon=True)
    try:
        worker.start()
        watched = time.monotonic()
        while worker.is_alive():
            worker.join(0.2)  # short waits: the main thread runs the signal handlers between them
            if watch is not None and worker.is_alive() and time.monotonic() - watched >= WATCH_EVERY_S:
                watch.check(worker)
                watched = time.monotonic()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    if watch is not None and watch.ended is not None:
        raise watch.ended
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
