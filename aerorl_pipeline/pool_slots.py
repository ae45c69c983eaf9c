"""The Dagster instance's pool slots: which steps hold them, which wait, and freeing those of dead runs.

A step of a pool (``duckdb_writer``) claims one of the pool's slots before it runs and frees it when it
ends; a step that finds every slot taken waits, as a *pending* claim, until one is freed. Dagster frees a
run's claims when its process ends the run. A process killed with SIGKILL (the OOM killer, a reboot, a
preempted node) ends nothing: its slot stays claimed in the instance's storage, and every later step of
the pool, from any command, schedule or UI launch on that instance, would wait for it forever.

:func:`free_dead_runs_slots` frees, through Dagster's own storage API, the claims of every run that can no
longer free them itself: a finished run (failed, canceled, or marked failed here because its process is
gone) or one the instance no longer knows. A run whose process is alive keeps its slots. Process ids are
this machine's (the instance is the local one, as in :mod:`aerorl_pipeline.instance`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

import dagster as dg
import psutil

START_EVENTS = {dg.DagsterEventType.RUN_START, dg.DagsterEventType.RUN_STARTING}
UNFINISHED = (dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunProcess:
    """The process that logged a run's start (its ``RUN_START``, else its ``RUN_STARTING``, event)."""

    pid: int
    started: float  # the start event's timestamp

    def alive(self) -> bool:
        """Is the process running, and the same one that logged the start (not a reused id)?"""
        try:
            process = psutil.Process(self.pid)
            return process.status() != psutil.STATUS_ZOMBIE and process.create_time() <= self.started + 1.0
        except psutil.Error:  # no such process
            return False


def run_process(instance: dg.DagsterInstance, run_id: str) -> RunProcess | None:
    """The process of run ``run_id``, or None when no start event names one."""
    starts = instance.get_records_for_run(run_id, of_type=START_EVENTS, ascending=False, limit=1).records
    start = starts[0].event_log_entry if starts else None
    if start is None or start.dagster_event is None or start.dagster_event.pid is None:
        return None
    return RunProcess(start.dagster_event.pid, start.timestamp)


@dataclass(frozen=True)
class SlotClaim:
    """A step's place in a pool: ``holding`` one of its slots, or waiting for one since ``since``."""

    pool: str
    run_id: str
    step_key: str
    holding: bool
    since: datetime | None  # when the claim was made (None: a slot held without a pending record)


def pool_claims(instance: dg.DagsterInstance) -> list[SlotClaim]:
    """Every claim on every pool of ``instance``: the steps holding a slot, then those waiting, by pool."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return []
    claims = []
    for pool in sorted(storage.get_concurrency_keys()):
        info = storage.get_concurrency_info(pool)
        enqueued = {(p.run_id, p.step_key): p.enqueued_timestamp for p in info.pending_steps}
        # a slot is held by a step that claimed it, and by one it was assigned to that has not claimed it yet
        # (Dagster counts both against the limit): a run killed between the two left such an assignment, which
        # blocked the pool with no slot claimed ("held by nobody", in a chaos run)
        held = ({(slot.run_id, slot.step_key) for slot in info.claimed_slots}
                | {(p.run_id, p.step_key) for p in info.pending_steps if p.assigned_timestamp is not None})
        claims += [SlotClaim(pool, run_id, step, True, enqueued.get((run_id, step))) for run_id, step in sorted(held)]
        claims += [SlotClaim(pool, p.run_id, p.step_key, False, p.enqueued_timestamp) for p in info.pending_steps
                   if (p.run_id, p.step_key) not in held]
    return claims


def fail_if_abandoned(instance: dg.DagsterInstance, run: dg.DagsterRun) -> bool:
    """Mark ``run`` failed when it is unfinished and the process that started it is gone; whether it was."""
    if run.status not in UNFINISHED:
        return False
    process = run_process(instance, run.run_id)
    if process is None or process.alive():
        return False  # no process to ask about, or in progress
    message = (f"run {run.run_id} was {run.status.value} but its process (pid {process.pid}) is gone: it was killed "
               "or crashed. Marked failed when the instance was next opened; rerun it to finish its work")
    instance.report_run_failed(run, message=message)
    log.warning(message)
    return True


def free_dead_runs_slots(instance: dg.DagsterInstance) -> list[str]:
    """Free every pool claim (held slots and waiting claims) of a run that cannot free them itself: finished,
    unknown to the instance, or unfinished with its process gone (marked failed first). One line per run
    freed; the ids of those runs."""
    freed = []
    for run_id in dict.fromkeys(claim.run_id for claim in pool_claims(instance)):
        run = instance.get_run_by_id(run_id)
        if run is not None and run.status in UNFINISHED and not fail_if_abandoned(instance, run):
            continue  # alive: it frees its own slots
        claims = [claim for claim in pool_claims(instance) if claim.run_id == run_id]
        instance.event_log_storage.free_concurrency_slots_for_run(run_id)
        status = "unknown to this instance" if run is None else instance.get_run_by_id(run_id).status.value
        log.warning(f"freed {describe_claims(claims)} of run {run_id} ({status}): its process cannot free them")
        freed.append(run_id)
    return freed


def describe_claims(claims: list[SlotClaim]) -> str:
    """``claims`` (of one run) in a few words.

    >>> describe_claims([SlotClaim("duckdb_writer", "r", "benchmark_report", True, None),
    ...                  SlotClaim("duckdb_writer", "r", "rows", False, None)])
    'the duckdb_writer slot of step benchmark_report and 1 waiting claim'
    """
    held = [claim for claim in claims if claim.holding]
    parts = [f"the {claim.pool} slot of step {claim.step_key}" for claim in held]
    waiting = len(claims) - len(held)
    if waiting:
        parts.append(f"{waiting} waiting claim{'s' if waiting > 1 else ''}")
    return " and ".join(parts) or "no claim"
