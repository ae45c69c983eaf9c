"""The persistent local Dagster instance the command line uses (and `dagster dev` shows).

Opening it also closes the books on runs a killed process left behind: a run still ``STARTING`` or
``STARTED`` whose process is gone is marked failed, with a ``RUN_FAILURE`` event (and a log line)
that says why. The process is the one that logged the run's start (its ``RUN_START``, else its
``RUN_STARTING``, event); a run whose process is alive is in progress and left alone, and so is a
``QUEUED`` run (it waits for a run queue, not for a process). Process ids are this machine's: the
instance is the local one.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import dagster as dg
import psutil

from assets.project import PROJECT_ROOT

DEFAULT_DAGSTER_HOME = PROJECT_ROOT / ".dagster_home"
INSTANCE_FILE = "dagster.yaml"
UNFINISHED = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
START_EVENTS = {dg.DagsterEventType.RUN_START, dg.DagsterEventType.RUN_STARTING}

log = logging.getLogger(__name__)


def ensure_dagster_home() -> Path:
    """Use ``$DAGSTER_HOME`` when set, else the project's ``.dagster_home`` (created if needed). A home
    without an instance file gets the project's (its pools; telemetry off), so Dagster never prints its
    missing-configuration notice and first-run banner in a command's output."""
    home = Path(os.environ.get("DAGSTER_HOME") or DEFAULT_DAGSTER_HOME)
    home.mkdir(parents=True, exist_ok=True)
    instance_file = home / INSTANCE_FILE
    if not instance_file.exists():
        shutil.copyfile(DEFAULT_DAGSTER_HOME / INSTANCE_FILE, instance_file)
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def local_instance() -> dg.DagsterInstance:
    ensure_dagster_home()
    instance = dg.DagsterInstance.get()
    fail_abandoned_runs(instance)
    return instance


def fail_abandoned_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark failed each unfinished run whose process is gone; the ids of the runs marked."""
    failed = []
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=UNFINISHED)):
        starts = instance.get_records_for_run(run.run_id, of_type=START_EVENTS, ascending=False, limit=1).records
        start = starts[0].event_log_entry if starts else None
        if start is None or start.dagster_event is None or start.dagster_event.pid is None:
            continue  # no process to ask about
        pid = start.dagster_event.pid
        if process_alive_since(pid, start.timestamp):
            continue
        message = (f"run {run.run_id} was {run.status.value} but its process (pid {pid}) is gone: it was killed or "
                   "crashed. Marked failed when the instance was next opened; rerun it to finish its work")
        instance.report_run_failed(run, message=message)
        log.warning(message)
        failed.append(run.run_id)
    return failed


def process_alive_since(pid: int, timestamp: float) -> bool:
    """Is process ``pid`` running, and the same process that existed at ``timestamp`` (not a reused id)?"""
    try:
        process = psutil.Process(pid)
        return process.status() != psutil.STATUS_ZOMBIE and process.create_time() <= timestamp + 1.0
    except psutil.Error:  # no such process
        return False
