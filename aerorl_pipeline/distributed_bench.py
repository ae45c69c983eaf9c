"""`aerorl bench` on a distributed executor: partition runs launched concurrently, each run's steps
executed by the configured engine (``[executor]``), all of them sharing one Dagster instance.

Each partition is a run of the ``benchmark`` job, as with the default executor, so reruns, the
report's per-partition replace and the UI work the same. Runs are launched from processes of
their own (several ``execute_job`` calls in one process deadlock in ``logging``), at most
``parallel`` at a time. Workers rebuild the job from this module's ``benchmark_job_of`` with the
same arguments, so every process sees the same config file and resources.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from aerorl_ops.stop import StopRequested, stop_requested
from aerorl_ops.storage.database_check import check_report_database
from aerorl_pipeline.failures import FAULT, CommandFailed, CommandFailure
from aerorl_pipeline.parent_bound import die_with_parent
from assets.project import DUCKDB_PATH, load_config
from assets.resources import ModelRuntime, default_resources

PARTITION_TAG = "dagster/partition"
WATCH_EVERY_S = 0.5
"""How often a bench looks for a stop or a lost worker while its partitions run."""


@dataclass(frozen=True)
class BenchResources:
    """What the resources of every process are built from (plain values: they travel to workers)."""

    database: str = str(DUCKDB_PATH)
    models_dir: str = ""  # empty: ModelRuntime's default
    device: str = "auto"
    torch_threads: int = 0


@dataclass(frozen=True)
class PartitionOutcome:
    partition_key: str
    run_id: str
    success: bool
    error: str = ""


def resources_of(config_path: str | Path, resources: BenchResources) -> dict[str, object]:
    """The resources of ``config_path``'s ``[storage]`` with ``resources``' database and model runtime."""
    built = default_resources(load_config(Path(config_path)).storage)
    runtime = {"device": resources.device, "torch_threads": resources.torch_threads}
    if resources.models_dir:
        runtime["models_dir"] = resources.models_dir
    built["model_runtime"] = ModelRuntime(**runtime)
    built["duckdb"] = DuckDBResource(database=resources.database)
    return built


def benchmark_job_of(config_path: str, database: str, models_dir: str, device: str,
                     torch_threads: int) -> dg.JobDefinition:
    """The ``benchmark`` job of ``config_path`` (its executor included) with these resources; what every
    worker reconstructs (``dg.build_reconstructable_job``)."""
    from aerorl_pipeline.definitions import build_definitions

    resources = BenchResources(database, models_dir, device, torch_threads)
    return build_definitions(config_path, resources_of(config_path, resources)).resolve_job_def("benchmark")


def reconstructable_benchmark_job(config_path: str | Path, resources: BenchResources):
    return dg.build_reconstructable_job("aerorl_pipeline.distributed_bench", "benchmark_job_of",
                                        reconstructable_kwargs={"config_path": str(config_path), **asdict(resources)})


def run_partition(config_path: str, resources: BenchResources, instance_ref, partition_key: str,
                  tags: Mapping[str, str], run_config: Mapping) -> PartitionOutcome:
    """One partition run on the job's executor (in a launcher process of its own)."""
    # dagster-celery re-registers its task for every step it submits; Celery warns each time
    warnings.filterwarnings("ignore", message="Task name 'execute_plan' is already registered")
    job = reconstructable_benchmark_job(config_path, resources)
    with dg.DagsterInstance.from_ref(instance_ref) as instance:
        result = dg.execute_job(job, instance, run_config=dict(run_config),
                                tags={**tags, PARTITION_TAG: partition_key})
        return PartitionOutcome(partition_key, result.run_id, result.success, failure_text(result))


def failure_text(result: dg.JobExecutionResult) -> str:
    """The errors of a failed run: its failed steps', else the run's own (a worker lost by the engine
    fails the run, not a step)."""
    errors = [event.step_failure_data.error.to_string() for event in result.get_step_failure_events()
              if event.step_failure_data.error is not None]
    if not errors:
        errors = [event.job_failure_data.error.to_string() for event in result.all_events
                  if event.is_failure and event.event_type == dg.DagsterEventType.RUN_FAILURE
                  and event.job_failure_data and event.job_failure_data.error is not None]
    return "\n".join(errors)


def none_lost() -> str | None:
    """No worker watched: the engine's workers are on other machines, or none is this bench's own."""
    return None


def run_partitions(config_path: str | Path, resources: BenchResources, instance: dg.DagsterInstance,
                   partition_keys: Sequence[str], tags: Mapping[str, str], run_config: Mapping,
                   parallel: int, lost: Callable[[], str | None] = none_lost) -> list[PartitionOutcome]:
    """Each partition's run, at most ``parallel`` at once; outcomes in ``partition_keys`` order. A damaged
    report database stops them before any starts (``DamagedDatabaseError``). Each launcher dies with this process
    (``aerorl_pipeline.parent_bound``): one left by a killed bench waited forever for the steps of its run, which
    stayed STARTED (its process alive).

    While they run, a stop asked for by a signal (``aerorl_ops.stop``) ends them (``end_launchers``): each run's
    executor revokes the steps not yet started and the run ends once the steps in hand have, then
    ``StopRequested`` is raised. A problem ``lost`` names (a local Celery worker gone, with the step it ran: a step
    whose run would wait for it forever) ends them at once: the launchers are killed, their runs marked failed and
    their pool slots freed (``aerorl_pipeline.instance``), and the problem is raised (``CommandFailed``, one line)."""
    check_report_database(resources.database)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(1, min(parallel, len(partition_keys))), mp_context=context,
                             initializer=die_with_parent, initargs=(os.getpid(),)) as pool:
        futures = [pool.submit(run_partition, str(config_path), resources, instance.get_ref(), str(key), dict(tags),
                               dict(run_config)) for key in partition_keys]
        ended = None
        while not all(future.done() for future in futures):
            wait(futures, timeout=WATCH_EVERY_S)
            if ended is None:
                ended = why_end(lost)
                if ended is not None:
                    end_launchers(list(pool._processes), instance, tags, gently=isinstance(ended, StopRequested))
        if ended is not None:
            kill_idle_launchers(pool)
    if isinstance(ended, CommandFailed):
        from aerorl_pipeline.instance import close_abandoned_runs

        close_abandoned_runs(instance)
    if ended is not None:
        raise ended
    return [future.result() for future in futures]


def kill_idle_launchers(pool: ProcessPoolExecutor) -> None:
    """Kill the launchers still alive once every partition's future is done after an end: each waits for another
    partition, and a killed launcher may have died holding the pool's queue lock (an idle launcher holds it while
    it waits), so the others would wait on that lock forever and the pool's shutdown with them (a chaos run's
    SIGTERMed bench hung so, its runs ended)."""
    for process in list(pool._processes.values()):
        if process.is_alive():
            process.kill()


def end_launchers(pids: list[int], instance: dg.DagsterInstance, tags: Mapping[str, str], gently: bool) -> None:
    """End the partition launchers ``pids``. ``gently``: SIGINT to each whose run (tagged ``tags``) has started, so
    its executor revokes the steps not yet started and ends the run once those in hand have; the others have no
    run yet, or have ended it, and are killed. Else every one is killed."""
    running = set()
    if gently:
        from aerorl_pipeline.pool_slots import UNFINISHED, run_process

        for run in instance.get_runs(filters=dg.RunsFilter(tags=dict(tags), statuses=list(UNFINISHED))):
            process = run_process(instance, run.run_id)
            running |= {process.pid} if process is not None else set()
    for pid in pids:
        try:
            os.kill(pid, signal.SIGINT if pid in running else signal.SIGKILL)
        except ProcessLookupError:
            continue  # it has just ended


def why_end(lost: Callable[[], str | None]) -> BaseException | None:
    """What ends a bench's partition runs now: a stop asked for by a signal, a lost worker, or nothing."""
    signum = stop_requested()
    if signum is not None:
        return StopRequested("interrupted while its partitions ran: their runs were stopped; rerun the command for "
                             "every partition", signum)
    problem = lost()
    return CommandFailed(CommandFailure(problem, FAULT, "")) if problem else None
