"""`aerorl bench --run-id ID` again: the benchmark run goes on where it stopped.

A partition has finished in benchmark run ``ID`` when the newest Dagster run of it tagged with ``ID`` succeeded,
with the same settings (the run config's ``ops``: every ``[generation]`` and ``[rewards]`` value) and on the
rows the bench reads now (its ``benchmark_report`` read the data versions the rows assets have now). Its rows
are in the report, each once, so a rerun of the same command skips it, and a bench killed every minute still
finishes, partition by partition; before, each start ran every partition again (a chaos run's bench with kills
10-40 s apart stopped at 456 of 912 generations after 13 starts). ``--redo`` runs every partition again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import dagster as dg

from aerorl_pipeline.distributed_bench import PARTITION_TAG
from assets.runs import BENCHMARK_RUN_TAG

REPORT_ASSET = dg.AssetKey("benchmark_report")
DATA_VERSION_TAG = "dagster/data_version"
INPUT_VERSION_TAG = "dagster/input_data_version/"


def data_version(instance: dg.DagsterInstance, key: dg.AssetKey) -> str | None:
    """The data version of ``key``'s newest materialization (None: never materialized)."""
    event = instance.get_latest_materialization_event(key)
    return None if event is None else (event.asset_materialization.tags or {}).get(DATA_VERSION_TAG)


def read_rows(instance: dg.DagsterInstance, run_id: str) -> dict[str, str] | None:
    """The rows' data versions that Dagster run ``run_id``'s ``benchmark_report`` read, by asset (None: no report)."""
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
    for record in records:
        materialization = record.event_log_entry.asset_materialization
        if materialization is not None and materialization.asset_key == REPORT_ASSET:
            return {name[len(INPUT_VERSION_TAG):]: version for name, version in (materialization.tags or {}).items()
                    if name.startswith(INPUT_VERSION_TAG)}
    return None


def finished_partitions(instance: dg.DagsterInstance, run_id: str, keys: Sequence[dg.MultiPartitionKey], ops: Mapping,
                        rows: Sequence[dg.AssetKey]) -> dict[str, str]:
    """The Dagster run id of each partition of ``keys`` that has finished in benchmark run ``run_id`` (module
    docstring), by partition key; ``ops`` the run config's ``ops`` the bench runs with, ``rows`` the rows assets
    it reads."""
    current = {key.to_user_string(): data_version(instance, key) for key in rows}
    finished = {}
    for key in map(str, keys):
        runs = instance.get_runs(filters=dg.RunsFilter(tags={BENCHMARK_RUN_TAG: run_id, PARTITION_TAG: key}),
                                 limit=1)  # the newest
        if not runs or runs[0].status != dg.DagsterRunStatus.SUCCESS or runs[0].run_config.get("ops", {}) != ops:
            continue
        used = read_rows(instance, runs[0].run_id)
        if used is not None and all(used.get(name) == version for name, version in current.items()):
            finished[key] = runs[0].run_id
    return finished


def unfinished(instance: dg.DagsterInstance, run_id: str, keys: Sequence[dg.MultiPartitionKey], ops: Mapping,
               rows: Sequence[dg.AssetKey]) -> tuple[dg.MultiPartitionKey, ...]:
    """Those of ``keys`` benchmark run ``run_id`` has not finished, with one line saying which it has, if any."""
    finished = finished_partitions(instance, run_id, keys, ops, rows)
    left = tuple(key for key in keys if str(key) not in finished)
    if finished:
        rest = f"running the other {len(left)}" if left else "nothing left to run"
        print(f"benchmark run {run_id}: {len(finished)} of {len(keys)} partitions already finished "
              f"({', '.join(finished)}): {rest} (--redo runs every one again)")
    return left
