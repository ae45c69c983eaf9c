"""Events a chaos run times its kills by (``scripts/chaos.py --by-events``): each a predicate over a workdir and the
start of the command's life (a date), true once that life has done something, so a kill lands mid-work however
fast or slow the machine is."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

Event = Callable[[Path, float], bool]


def checkpoint_written(run_name: str, step: int) -> Event:
    """Training run ``run_name`` has saved its ``step-<step>`` checkpoint (renamed into place: whole) in this life."""

    def written(workdir: Path, since: float) -> bool:
        folder = workdir / "data" / "checkpoints" / run_name / f"step-{step}"
        return folder.is_dir() and folder.stat().st_mtime >= since

    return written


def open_instance(home: Path):
    """The Dagster instance at ``home`` once a command has made it (None before), opened under the lock commands
    open it under: opened while a command creates its storage, both would create it, and one fail."""
    import dagster as dg
    from filelock import FileLock

    from aerorl_pipeline.instance import OPEN_LOCK

    if not (home / "dagster.yaml").exists():
        return None
    with FileLock(home / OPEN_LOCK):
        return dg.DagsterInstance.from_config(str(home))


def bench_generating(run_id: str) -> Event:
    """A partition run of benchmark run ``run_id``, created in this life, has started its ``generations`` step and
    not finished it."""
    instances = {}

    def generating(workdir: Path, since: float) -> bool:
        import dagster as dg

        from assets.runs import BENCHMARK_RUN_TAG

        if workdir not in instances:
            instance = open_instance(workdir / "dagster_home")
            if instance is None:
                return False
            instances[workdir] = instance
        instance = instances[workdir]
        runs = instance.get_runs(filters=dg.RunsFilter(tags={BENCHMARK_RUN_TAG: run_id},
                                                       statuses=[dg.DagsterRunStatus.STARTED],
                                                       created_after=datetime.fromtimestamp(since, UTC)))
        for run in runs:
            steps = {(entry.step_key, entry.dagster_event_type)
                     for entry in instance.all_logs(run.run_id, of_type={dg.DagsterEventType.STEP_START,
                                                                         dg.DagsterEventType.STEP_SUCCESS})}
            if ("generations", dg.DagsterEventType.STEP_START) in steps and \
                    ("generations", dg.DagsterEventType.STEP_SUCCESS) not in steps:
                return True
        return False

    return generating
