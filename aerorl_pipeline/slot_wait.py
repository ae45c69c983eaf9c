"""Waiting for a pool slot, as the command that waits sees it: said after a few seconds, kept up only while the
holder lives, ended by a signal or by a limit.

A job command (``aerorl bench``, ``train``, ``eval``) runs its Dagster job in a worker thread
(``console.interruptible``), and its main thread calls :meth:`SlotWait.check` about once a second. When a step of
a run of this process (or of a process it started) has waited for a pool slot for ``NOTICE_AFTER_S``:

- one line names the run and step that hold the slot, since when, and the holder's process, when another run
  holds it (a step queued behind steps of its own run, as a Celery bench's report steps take the writer's slot
  one at a time, is the pool at work: not said);
- a holder whose process is gone is marked failed and its claims freed (``pool_slots.free_dead_runs_slots``), so
  the waiting step gets the slot at its next claim;
- a stop asked for by SIGINT or SIGTERM ends the wait at once: the waiting run is canceled, its pending claims
  freed (Dagster frees them as its execution ends), and the command exits 130 or 143;
- a wait longer than ``[executor] pool_wait_limit_s`` (0: no limit) ends the same way, with a one-line error
  naming the holder.

Dagster's own wait loop, in the worker thread, looks at no signal and never sleeps, so ending the wait means
raising in that thread (:func:`raise_in_thread`). That is done only while the worker is between steps, never
inside a step's code, and only for a run of this process; a run of a child process (a partition of another
executor) is noticed and its dead holders freed, but it is stopped by its own process.
"""

from __future__ import annotations

import ctypes
import math
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import dagster as dg
import psutil
from tqdm import tqdm

from aerorl_ops.stop import StopRequested, request_stop, stop_requested
from aerorl_pipeline.failures import FAULT, CommandFailed, CommandFailure
from aerorl_pipeline.pool_slots import SlotClaim, free_dead_runs_slots, pool_claims, run_process

NOTICE_AFTER_S = 5.0
"""How long a step waits for a slot before the command says who holds it."""
STEP_FUNCTION = "dagster_event_sequence_for_step"
"""The Dagster function that runs one step's code in the worker thread: while it is on the worker's stack, the
worker is inside a step."""


class SlotWaitStopped(KeyboardInterrupt):
    """Raised in the worker thread to end a wait for a pool slot: Dagster then ends the run as interrupted."""


@dataclass(frozen=True)
class Waiting:
    """A step of one of this process's runs, waiting for a slot of ``claim.pool`` held by ``holders``."""

    claim: SlotClaim
    pid: int  # the waiting run's process
    holders: tuple[SlotClaim, ...]

    @property
    def waited_s(self) -> float:
        """Seconds the step has waited, now: since the instance's record of its claim (:func:`claimed_s_ago`)."""
        return claimed_s_ago(self.claim)

    @property
    def blocked_by_another_run(self) -> bool:
        """Whether a run other than the waiting one holds the slot."""
        return any(holder.run_id != self.claim.run_id for holder in self.holders)

    def describe(self) -> str:
        held_by = "; ".join(f"run {h.run_id} step {h.step_key}{since(h.since)}" for h in self.holders) or "nobody"
        return (f"step {self.claim.step_key} of run {self.claim.run_id} has waited {math.ceil(self.waited_s)} s for a "
                f"{self.claim.pool} slot, held by {held_by}")


def since(moment: datetime | None) -> str:
    """`` since <UTC time>`` or nothing.

    >>> since(datetime(2026, 11, 28, 21, 56, 6, tzinfo=UTC)), since(None)
    (' since 21:56:06 UTC', '')
    """
    return "" if moment is None else f" since {moment.astimezone(UTC):%H:%M:%S} UTC"


@dataclass
class SlotWait:
    """The main thread's watch over this process's waits for pool slots (module docstring). ``limit_s``: end a
    wait after this long (0: wait as long as the holder's process lives)."""

    limit_s: float = 0.0
    notice_after_s: float = NOTICE_AFTER_S
    pid: int = field(default_factory=os.getpid)
    ended: BaseException | None = None  # what the command raises once its worker has stopped
    _ref: Any = None  # the watched instance's ref (``DagsterInstance.get_ref``)
    _instance: dg.DagsterInstance | None = None
    _said: set[tuple[str, str]] = field(default_factory=set)

    def check(self, worker: threading.Thread) -> None:
        """Look at this process's waiting steps once (module docstring); ``worker`` runs the job."""
        waiting = self.waiting()
        if not waiting:
            return
        if any(not holder_alive(self.instance, w) for w in waiting):
            free_dead_runs_slots(self.instance)  # says which, in one line per run
            return
        for wait in waiting:
            key = (wait.claim.run_id, wait.claim.step_key)
            if wait.waited_s >= self.notice_after_s and key not in self._said and wait.blocked_by_another_run:
                self._said.add(key)
                tqdm.write(f"aerorl: {wait.describe()} (its process is alive; waiting on; Ctrl-C stops)",
                           file=sys.stderr)
        own = [wait for wait in waiting if wait.pid == self.pid]
        if not own or in_step(worker):
            return
        signum = stop_requested()
        over = [wait for wait in own if self.limit_s and wait.waited_s > self.limit_s]
        if signum is not None:
            self.end(worker, own, StopRequested(f"stopped while waiting for a pool slot: {own[0].describe()}; "
                                                "nothing is claimed: rerun the command to go on", signum))
        elif over:
            message = (f"{over[0].describe()}, over [executor] pool_wait_limit_s = {self.limit_s:g}: stop that run "
                       "or raise the limit (0 waits as long as the holder's process lives)")
            self.end(worker, own, CommandFailed(CommandFailure(message, FAULT, "")))

    def waiting(self) -> list[Waiting]:
        """The steps of runs of this process or its children that wait for a slot, with the slot's holders."""
        claims = pool_claims(self.instance) if self._ref is not None else []
        ours = own_process_ids(self.pid)
        waiting = []
        for claim in claims:
            process = None if claim.holding else run_process(self.instance, claim.run_id)
            if process is None or process.pid not in ours:
                continue
            holders = tuple(c for c in claims if c.holding and c.pool == claim.pool)
            waiting.append(Waiting(claim, process.pid, holders))
        return waiting

    def end(self, worker: threading.Thread, own: list[Waiting], reason: BaseException) -> None:
        """End the waits of ``own`` runs: each is marked canceling, the worker is interrupted, and the command
        will raise ``reason`` once the worker has stopped. A stop is asked for too, so the command stops after
        the interrupted run instead of starting the next one."""
        if self.ended is not None:
            return
        self.ended = reason
        for run_id in dict.fromkeys(wait.claim.run_id for wait in own):
            run = self.instance.get_run_by_id(run_id)
            if run is not None and run.status == dg.DagsterRunStatus.STARTED:
                self.instance.report_run_canceling(run, message=str(reason))
        if stop_requested() is None:
            request_stop(2)  # the command's safe points stop it; its error is ``reason``
        raise_in_thread(worker, SlotWaitStopped)

    def watch(self, instance: dg.DagsterInstance) -> None:
        """Watch the waits on ``instance``, which the command has opened (its storage made): the watch opens its
        own instance of the same ref, so the two threads share no connection, and never race to create the
        storage of a new Dagster home."""
        self._ref = instance.get_ref()

    @property
    def instance(self) -> dg.DagsterInstance:
        if self._instance is None:
            assert self._ref is not None, "SlotWait.instance before SlotWait.watch"
            self._instance = dg.DagsterInstance.from_ref(self._ref)
        return self._instance


def claimed_s_ago(claim: SlotClaim) -> float:
    """Seconds since ``claim`` was made, by the instance's record of it (0 without one): what a wait has lasted,
    however seldom a busy process's main thread gets to look (its checks took 9 s on 2 loaded cores)."""
    return 0.0 if claim.since is None else max(0.0, time.time() - claim.since.timestamp())


def holder_alive(instance: dg.DagsterInstance, wait: Waiting) -> bool:
    """Whether every run holding the slot ``wait`` waits for is unfinished with its process alive."""
    for holder in wait.holders:
        run = instance.get_run_by_id(holder.run_id)
        process = run_process(instance, holder.run_id)
        if run is None or run.is_finished or (process is not None and not process.alive()):
            return False
    return True


def own_process_ids(pid: int) -> set[int]:
    """``pid`` and its descendants (the processes a command started to run partitions)."""
    try:
        return {pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))}
    except psutil.Error:
        return {pid}


def in_step(worker: threading.Thread) -> bool:
    """Whether ``worker`` is running a step's code now (``STEP_FUNCTION`` on its stack)."""
    frame = sys._current_frames().get(worker.ident)
    while frame is not None:
        if frame.f_code.co_name == STEP_FUNCTION:
            return True
        frame = frame.f_back
    return False


def raise_in_thread(thread: threading.Thread, error: type[BaseException]) -> None:
    """Raise ``error`` in ``thread`` at its next Python instruction (CPython's ``PyThreadState_SetAsyncExc``)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(error))
