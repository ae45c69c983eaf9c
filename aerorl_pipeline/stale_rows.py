"""`aerorl bench --skip-rows` and `aerorl train`: which cached dataset rows are stale, and which the command
refreshes.

Each ``<name>_rows`` materialization records the fingerprint of its source (``assets.datasets.rows``).
With ``--skip-rows``, a dataset whose source now has another fingerprint has stale rows: the bench says
so in one line and refreshes them before its partitions, or keeps them with ``--stale-ok``. Rows with no
recorded fingerprint (cached before fingerprints were recorded) are read as they are.

``aerorl train`` refreshes the rows assets of its run's environments (``assets.run_rows``) that are
missing or were drawn from another source, settings included, than the run's (``run_rows_to_refresh``),
and reads the others as they are cached.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import dagster as dg

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.envs.configured import dataset_fingerprint
from aerorl_ops.rows.source_fingerprint import SourceChange, SourceFingerprint, source_change
from assets.datasets.rows import recorded_fingerprint, recorded_source
from assets.run_rows import RunRows


@dataclass(frozen=True)
class StaleRows:
    """A dataset whose cached rows were built from a source that has changed since (``change``)."""

    dataset: DatasetSettings
    change: SourceChange

    def message(self, stale_ok: bool) -> str:
        """The line ``aerorl bench`` prints about it: the rows are refreshed, or kept with ``stale_ok``."""
        action = "keeping them (--stale-ok)" if stale_ok else "refreshing them (--stale-ok keeps the cached rows)"
        return (f"aerorl: rows of dataset {self.dataset.name!r} are stale: {self.change.subject} changed since "
                f"they were cached ({self.change.details}); {action}")


def stale_rows(datasets: Sequence[DatasetSettings], recorded: Mapping[str, SourceFingerprint]) -> list[StaleRows]:
    """Those of ``datasets`` whose source differs now from the fingerprint ``recorded`` for their cached rows
    (by dataset name); a dataset with none recorded is not among them."""
    stale = []
    for dataset in (dataset for dataset in datasets if dataset.name in recorded):
        change = source_change(recorded[dataset.name], dataset_fingerprint(dataset))
        if change is not None:
            stale.append(StaleRows(dataset, change))
    return stale


def rows_to_refresh(config: BenchmarkConfig, instance: dg.DagsterInstance, skip_rows: bool,
                    stale_ok: bool) -> bool | tuple[str, ...]:
    """What ``aerorl bench`` refreshes before its partitions (``run_bench``'s ``refresh_rows``): every
    benchmarked dataset's rows without ``skip_rows``; with it, the rows assets of the stale ones (each
    named in a line on stderr), and none with ``stale_ok``."""
    if not skip_rows:
        return True
    recorded = {dataset.name: fingerprint for dataset in config.benchmarked
                if (fingerprint := recorded_fingerprint(instance, dataset)) is not None}
    stale = stale_rows(config.benchmarked, recorded)
    for rows in stale:
        print(rows.message(stale_ok), file=sys.stderr)
    return () if stale_ok else tuple(rows.dataset.asset_name for rows in stale)


def run_rows_to_refresh(instance: dg.DagsterInstance, rows: Iterable[RunRows]) -> list[dg.AssetKey]:
    """The keys of those of ``rows`` never materialized, or whose latest materialization was drawn from
    another source (files, package, or any setting: split, limit, seed, ...) than their dataset's now."""
    stale = []
    for run_rows in rows:
        recorded = recorded_source(instance, run_rows.key)
        if recorded is None or source_change(recorded, dataset_fingerprint(run_rows.dataset)) is not None:
            stale.append(run_rows.key)
    return stale


def refresh_run_rows(defs: dg.Definitions, instance: dg.DagsterInstance, rows: Iterable[RunRows]) -> list[dg.AssetKey]:
    """Materialize those of ``rows`` that ``run_rows_to_refresh`` names, in this process (quietly: the run's log
    says where each environment came from); the keys refreshed. Rows that fail are a ``CommandFailed`` naming
    the error (no job runs on them)."""
    from aerorl_pipeline.console import CONSOLE_LOGS, console_job
    from aerorl_pipeline.failures import CommandFailed, failure_from_results

    stale = run_rows_to_refresh(instance, rows)
    if stale:
        result = console_job(defs.resolve_implicit_global_asset_job_def()).execute_in_process(
            asset_selection=stale, instance=instance, run_config=CONSOLE_LOGS, raise_on_error=False)
        failure = failure_from_results([result])
        if failure is not None:
            raise CommandFailed(failure)
    return stale
