"""`aerorl bench --skip-rows`: which cached dataset rows are stale, and which rows the bench refreshes.

Each ``<name>_rows`` materialization records the fingerprint of its source (``assets.datasets.rows``).
With ``--skip-rows``, a dataset whose source now has another fingerprint has stale rows: the bench says
so in one line and refreshes them before its partitions, or keeps them with ``--stale-ok``. Rows with no
recorded fingerprint (cached before fingerprints were recorded) are read as they are.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import dagster as dg

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.envs.configured import dataset_fingerprint
from aerorl_ops.rows.source_fingerprint import SourceChange, SourceFingerprint, source_change
from assets.datasets.rows import recorded_fingerprint


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
