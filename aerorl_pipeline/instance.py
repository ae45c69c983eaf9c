"""The persistent local Dagster instance the command line uses (and `dagster dev` shows).

Opening it also closes the books on runs a killed process left behind: a run still ``STARTING`` or
``STARTED`` whose process is gone is marked failed, with a ``RUN_FAILURE`` event (and a log line)
that says why, and the pool slots it held, or waited for, are freed (``aerorl_pipeline.pool_slots``), so the
next step of the pool does not wait for a run that will never free them. The process is the one that
logged the run's start (its ``RUN_START``, else its ``RUN_STARTING``, event); a run whose process is alive
is in progress and left alone, and so is a ``QUEUED`` run (it waits for a run queue, not for a process).
Process ids are this machine's: the instance is the local one.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import dagster as dg

from aerorl_pipeline.pool_slots import UNFINISHED, fail_if_abandoned, free_dead_runs_slots
from assets.project import PROJECT_ROOT

DEFAULT_DAGSTER_HOME = PROJECT_ROOT / ".dagster_home"
INSTANCE_FILE = "dagster.yaml"


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
    free_dead_runs_slots(instance)
    return instance


def fail_abandoned_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark failed each unfinished run whose process is gone; the ids of the runs marked."""
    return [run.run_id for run in instance.get_runs(filters=dg.RunsFilter(statuses=list(UNFINISHED)))
            if fail_if_abandoned(instance, run)]
