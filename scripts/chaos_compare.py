"""What "nothing lost" means after a chaos run (``scripts/chaos.py``), checked against an undisturbed run of the
same settings in another workdir.

- Training: the run's ``training_steps``, ``training_evals``, ``training_eval_types`` and ``training_rollouts``
  rows equal the undisturbed run's, on every column but the measured ones (``TRAINING_MEASURED``: a step's or
  evaluation's seconds, throughput and memory).
- Benchmark: the ``generations``, ``reward_scores`` and ``benchmark_summary`` rows equal the undisturbed run's on
  their behaviour columns (``aerorl_ops.storage.behaviour_rows``; the chaos config's latency budget is out of
  reach, so the cost reward measures no time), and each (model, batch size, sample) is there exactly once.
- The Dagster instance: no pool slot claimed or waited for, no run left ``STARTING`` / ``STARTED``.
- No process a command started outlives it (an orphaned Celery worker, a partition launcher).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
from chaos_events import open_instance

from aerorl_ops.storage.behaviour_rows import TRAINING_MEASURED, behaviour_rows

TRAINING_TABLES = ("training_steps", "training_evals", "training_eval_types", "training_rollouts")
TRAINING_ORDER = {"training_steps": "step, phase", "training_evals": "step, phase",
                  "training_eval_types": "step, phase, question_type", "training_rollouts": "step, row"}
BENCH_TABLES = ("generations", "reward_scores", "benchmark_summary")
ONCE_KEY = ("model_key", "batch_size", "sample_id")
"""A generation's and its scores' key within a benchmark run: each must be stored once."""


@dataclass(frozen=True)
class TableCheck:
    """One table's rows of the disturbed run against the undisturbed run's."""

    table: str
    expected: int  # rows of the undisturbed run
    found: int  # rows of the disturbed run
    equal: bool
    repeated: int = 0  # keys stored more than once

    @property
    def ok(self) -> bool:
        return self.equal and self.repeated == 0

    def line(self) -> str:
        verdict = "identical" if self.equal else "DIFFERENT"
        repeats = f", {self.repeated} keys stored more than once" if self.repeated else ""
        return f"{self.table}: {verdict} ({self.found} of {self.expected} rows{repeats})"


def training_columns(conn: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    return [name for name, *_ in conn.execute(f'DESCRIBE "{table}"').fetchall()
            if name not in TRAINING_MEASURED and name != "run_id"]


def training_rows(database: Path, run_id: str) -> dict[str, list[tuple]]:
    """Run ``run_id``'s rows of each training table, measured columns left out, in key order."""
    with duckdb.connect(str(database), read_only=True) as conn:
        present = {name for (name,) in conn.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        found = {}
        for table in TRAINING_TABLES:
            if table not in present:
                found[table] = []
                continue
            selected = ", ".join(f'"{name}"' for name in training_columns(conn, table))
            found[table] = conn.execute(f'SELECT {selected} FROM "{table}" WHERE run_id = ? '
                                        f"ORDER BY {TRAINING_ORDER[table]}", [run_id]).fetchall()
        return found


def repeated_keys(database: Path, table: str, run_id: str) -> int:
    """How many (model, batch size, sample) keys of ``run_id`` ``table`` holds more than once."""
    key = ", ".join(ONCE_KEY)
    with duckdb.connect(str(database), read_only=True) as conn:
        return conn.execute(f'SELECT count(*) FROM (SELECT {key} FROM "{table}" WHERE run_id = ? GROUP BY {key} '
                            "HAVING count(*) > 1)", [run_id]).fetchone()[0]


def compare_tables(expected: dict[str, list[tuple]], found: dict[str, list[tuple]],
                   repeated: dict[str, int] | None = None) -> list[TableCheck]:
    """Each table of ``expected`` against ``found``, rows in order.

    >>> [c.line() for c in compare_tables({"t": [(1,), (2,)]}, {"t": [(1,), (2,)]})]
    ['t: identical (2 of 2 rows)']
    >>> [c.ok for c in compare_tables({"t": [(1,), (2,)]}, {"t": [(1,), (3,)]})]
    [False]
    """
    repeated = repeated or {}
    return [TableCheck(table, len(rows), len(found.get(table, [])), rows == found.get(table, []),
                       repeated.get(table, 0)) for table, rows in expected.items()]


def compare_training(undisturbed: Path, disturbed: Path, run_id: str, reference_run_id: str) -> list[TableCheck]:
    """The disturbed run's training rows against the undisturbed run's (databases ``disturbed`` / ``undisturbed``)."""
    return compare_tables(training_rows(undisturbed, reference_run_id), training_rows(disturbed, run_id))


def compare_bench(undisturbed: Path, disturbed: Path, run_id: str, reference_run_id: str) -> list[TableCheck]:
    """The disturbed benchmark run's report rows against the undisturbed run's, and each key once."""
    expected = behaviour_rows(str(undisturbed), reference_run_id, BENCH_TABLES)
    found = behaviour_rows(str(disturbed), run_id, BENCH_TABLES)
    repeated = {table: repeated_keys(disturbed, table, run_id) for table in ("generations", "reward_scores")}
    return compare_tables(expected, found, repeated)


@dataclass(frozen=True)
class InstanceLeftovers:
    """What a workdir's Dagster instance holds that a finished chaos run must not: claims and unfinished runs."""

    claims: tuple[str, ...]
    unfinished: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.claims and not self.unfinished

    def line(self) -> str:
        if self.ok:
            return "Dagster instance: no pool slot claimed or waited for, no run left STARTING or STARTED"
        return (f"Dagster instance: {len(self.claims)} pool claims left ({'; '.join(self.claims) or '-'}), "
                f"{len(self.unfinished)} runs left unfinished ({', '.join(self.unfinished) or '-'})")


def instance_leftovers(dagster_home: Path) -> InstanceLeftovers:
    """The pool claims and the ``STARTING`` / ``STARTED`` runs of the instance at ``dagster_home``."""
    import dagster as dg

    from aerorl_pipeline.pool_slots import UNFINISHED, pool_claims

    with open_instance(dagster_home) as instance:
        claims = tuple(f"{c.pool} {'held' if c.holding else 'waited for'} by run {c.run_id} step {c.step_key}"
                       for c in pool_claims(instance))
        unfinished = tuple(f"{run.run_id} ({run.status.value})"
                           for run in instance.get_runs(filters=dg.RunsFilter(statuses=list(UNFINISHED))))
    return InstanceLeftovers(claims, unfinished)


def lines(checks: Sequence[TableCheck]) -> list[str]:
    return [check.line() for check in checks]
