"""A training run's rows, appended to the report database as they happen.

Each ``training_steps`` row is written when its step ends, each ``training_evals`` /
``training_eval_types`` / ``training_eval_sources`` row (and the ``eval_*`` rows of a sampled evaluation)
when its evaluation ends, each as an upsert by its key (``ROW_KEYS``; an eval id for the ``eval_*`` tables) in one
transaction: a resumed run re-records the steps after its checkpoint in place, and a run killed at
any point keeps every row it wrote. The ``training_runs`` row is written when the run starts and
completed when it ends (``finished_at``). Only :meth:`RunRecorder.start` with ``fresh=True`` (a run
started over) deletes the run's earlier rows.

The recorder opens a connection per write through ``connect`` (``DuckDBResource.get_connection``, or
``functools.partial(duckdb.connect, path)``), so other writers of the database are never locked out
for the length of a run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa

from aerorl_ops.eval_runner.held_out import EvalResult
from aerorl_ops.rl.record.result import SampledEval
from aerorl_ops.rl.record.rows import (
    TrainingRunRecord,
    eval_rows,
    eval_source_rows,
    eval_type_rows,
    sampled_eval_writes,
    step_rows,
)
from aerorl_ops.rl.step.rollout_samples import RolloutSample
from aerorl_ops.rl.step.stats import StepStats
from aerorl_ops.rows.load_result import RejectedRow
from aerorl_ops.storage.duckdb_store import (
    PartitionWrite,
    ensure_tables,
    rejected_rows_table,
    transaction,
    upsert_rows,
    write_partitions,
)
from aerorl_ops.storage.eval_schema import EVAL_COMPARISONS, EVAL_METRICS, EVAL_RUNS, EVAL_SAMPLES, EVAL_TABLES
from aerorl_ops.storage.schema import REJECTED_ROWS, TableSpec
from aerorl_ops.storage.training_schema import (
    TRAINING_EVAL_SOURCES,
    TRAINING_EVAL_TYPES,
    TRAINING_EVALS,
    TRAINING_ROLLOUTS,
    TRAINING_RUNS,
    TRAINING_STEPS,
    TRAINING_TABLES,
)

Connect = Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]
"""Opens a connection to the report database, closed when the block ends."""

ROW_KEYS: Mapping[str, tuple[str, ...]] = {
    TRAINING_RUNS.name: ("run_id",),
    TRAINING_STEPS.name: ("run_id", "step"),
    TRAINING_EVALS.name: ("run_id", "step", "phase", "distribution"),
    TRAINING_EVAL_TYPES.name: ("run_id", "step", "phase", "question_type", "distribution"),
    TRAINING_EVAL_SOURCES.name: ("run_id", "step", "phase", "source", "distribution"),
}
"""The columns that name one row of each training table: a write replaces the stored row of its key (NULL equals
NULL: ``distribution`` is NULL for the run's own held-out sample, and in rows written before the column existed)."""
ROLLOUT_IMAGES_DIR = "rollout_images"
"""Beside the report database: the sampled rollouts' images, one file per SHA-256."""


def save_once(path: Path, data: bytes) -> None:
    """``data`` at ``path`` unless a file is there already (written to a temporary name, then renamed)."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_bytes(data)
    partial.replace(path)

RECORDED_TABLES = (*TRAINING_TABLES, *EVAL_TABLES, REJECTED_ROWS)
TRAINING_STAGE, HELD_OUT_STAGE, VALIDATION_STAGE = "training", "held_out", "validation"
"""``rejected_rows.stage`` of the rows the training and the held-out environments reject."""
PHASE_ORDER = ("no_image_prior", "base", "warmup", "rl", "final", "control")


@dataclass(frozen=True)
class Rejections:
    """The rows one environment of a run rejected: ``stage`` (``TRAINING_STAGE`` / ``HELD_OUT_STAGE`` /
    ``VALIDATION_STAGE``) and the environment's name."""

    stage: str
    dataset: str
    rows: Sequence[RejectedRow]


@dataclass(frozen=True)
class StoredRun:
    """What the report database holds of a run: its ``training_runs`` row and its evaluations of its own
    held-out sample (``evaluations``: one row per evaluation, in the order the run made them; accuracy per
    question type in a column each; the held-out distributions' rows are in ``training_evals``)."""

    record: TrainingRunRecord
    evaluations: pd.DataFrame
    recorded_steps: int

    @property
    def finished(self) -> bool:
        return self.record.finished_at is not None

    def accuracy(self, phase: str) -> float | None:
        """The accuracy of the run's last evaluation of ``phase``, None when it has none."""
        chosen = self.evaluations[self.evaluations["phase"] == phase] if len(self.evaluations) else []
        return float(chosen["accuracy"].iloc[-1]) if len(chosen) else None

    def evaluation_summary(self) -> pd.DataFrame:
        """``evaluations`` rounded for a person: seconds to 0.1, accuracies to 4 places."""
        return self.evaluations.round({"wall_s": 1, **{c: 4 for c in self.evaluations.columns
                                                      if c not in ("step", "phase", "wall_s", "n")}})


class RunRecorder:
    """Writes the rows of run ``run_id`` through ``connect`` (see the module docstring)."""

    def __init__(self, connect: Connect, run_id: str, images_dir: Path | None = None) -> None:
        self.connect = connect
        self.run_id = run_id
        self.images_dir = images_dir  # where sampled rollouts' images are saved, once each, under their hash
        self.record: TrainingRunRecord | None = None
        with connect() as conn:
            ensure_tables(conn, RECORDED_TABLES)

    def stored(self) -> StoredRun | None:
        """The run as stored, or None when the database has no ``training_runs`` row for it."""
        with self.connect() as conn:
            found = conn.execute(f"SELECT {', '.join(TRAINING_RUNS.column_names)} FROM training_runs "
                                 "WHERE run_id = ?", [self.run_id]).fetchall()
            if not found:
                return None
            evals = conn.execute("SELECT step, phase, wall_s, accuracy, accuracy_stderr, n FROM training_evals "
                                 "WHERE run_id = ? AND distribution IS NULL", [self.run_id]).fetchall()
            types = conn.execute("SELECT step, phase, question_type, accuracy FROM training_eval_types "
                                 "WHERE run_id = ? AND distribution IS NULL ORDER BY question_type",
                                 [self.run_id]).fetchall()
            (steps,), = conn.execute("SELECT count(*) FROM training_steps WHERE run_id = ?", [self.run_id]).fetchall()
        values = dict(zip(TRAINING_RUNS.column_names, found[0], strict=True))
        return StoredRun(TrainingRunRecord(**values), evaluation_table(evals, types), int(steps))

    def start(self, record: TrainingRunRecord, fresh: bool) -> TrainingRunRecord:
        """Write the ``training_runs`` row of a run that starts (``finished_at`` NULL); returns it.

        ``fresh``: the run starts over, its earlier rows are deleted first. Else (a resumed run, or a run
        killed before its first checkpoint) every row stays, and the row keeps its first ``started_at``."""
        with self.connect() as conn, transaction(conn):
            if fresh:
                self._delete_rows(conn)
            else:
                first = conn.execute("SELECT started_at FROM training_runs WHERE run_id = ?", [self.run_id]).fetchall()
                record = replace(record, started_at=first[0][0]) if first and first[0][0] else record
            upsert_rows(conn, TRAINING_RUNS, ROW_KEYS[TRAINING_RUNS.name], TRAINING_RUNS.rows([record]))
        self.record = record
        return record

    def rejections(self, rejections: Sequence[Rejections]) -> int:
        """Store the rows each environment rejected (replacing the run's earlier ones of those stages) and
        their count in ``training_runs.rejected_rows``; returns the count."""
        count = sum(len(r.rows) for r in rejections)
        tables = [rejected_rows_table(self.run_id, r.stage, r.dataset, r.rows) for r in rejections]
        with self.connect() as conn, transaction(conn):
            stages = sorted({r.stage for r in rejections})
            conn.execute(f"DELETE FROM rejected_rows WHERE run_id = ? AND stage IN ({', '.join('?' * len(stages))})",
                         [self.run_id, *stages])
            for table in tables:
                conn.register("_aerorl_rejected", table)
                conn.execute(f"INSERT INTO rejected_rows ({', '.join(REJECTED_ROWS.column_names)}) "
                             f"SELECT {', '.join(REJECTED_ROWS.column_names)} FROM _aerorl_rejected")
                conn.unregister("_aerorl_rejected")
        self.update(rejected_rows=count)
        return count

    def update(self, **fields: object) -> None:
        """Rewrite the run's ``training_runs`` row with ``fields`` changed (after :meth:`start`)."""
        if self.record is None:
            raise RuntimeError(f"run {self.run_id}: RunRecorder.start must write the run's row before it changes")
        self.record = replace(self.record, **fields)
        self._upsert(TRAINING_RUNS, TRAINING_RUNS.rows([self.record]))

    def finish(self, record: TrainingRunRecord) -> None:
        """Complete the run's row (``finished_at`` and what the run did)."""
        self.record = record
        self._upsert(TRAINING_RUNS, TRAINING_RUNS.rows([record]))

    def step(self, stats: StepStats) -> None:
        self._upsert(TRAINING_STEPS, step_rows(self.run_id, [stats]))

    def evaluation(self, evaluation: EvalResult) -> None:
        self._upsert(TRAINING_EVALS, eval_rows(self.run_id, [evaluation]),
                     (TRAINING_EVAL_TYPES, eval_type_rows(self.run_id, [evaluation])),
                     (TRAINING_EVAL_SOURCES, eval_source_rows(self.run_id, [evaluation])))

    def sampled(self, sampled: SampledEval) -> None:
        with self.connect() as conn, transaction(conn):
            write_partitions(conn, sampled_eval_writes(self.run_id, sampled))

    def rollouts(self, samples: Sequence[RolloutSample]) -> None:
        """A step's sampled replies in ``training_rollouts`` (replacing the step's earlier rows: a resumed
        run's), each of their images saved once as ``<images_dir>/<sha256>`` (its encoded bytes)."""
        if self.images_dir is not None:
            for sample in samples:
                for digest, image in zip(sample.image_sha256s, sample.images, strict=True):
                    save_once(self.images_dir / digest, image)
        writes = [PartitionWrite(TRAINING_ROLLOUTS, {"run_id": self.run_id, "step": step}, pa.Table.from_pylist(
            [{"run_id": self.run_id, **{name: getattr(sample, name) for name in TRAINING_ROLLOUTS.column_names
                                         if name != "run_id"}} for sample in samples if sample.step == step],
            schema=TRAINING_ROLLOUTS.schema)) for step in sorted({sample.step for sample in samples})]
        with self.connect() as conn, transaction(conn):
            write_partitions(conn, writes)

    def _upsert(self, spec: TableSpec, rows: pa.Table, *more: tuple[TableSpec, pa.Table]) -> None:
        with self.connect() as conn, transaction(conn):
            for table, table_rows in ((spec, rows), *more):
                upsert_rows(conn, table, ROW_KEYS[table.name], table_rows)

    def _delete_rows(self, conn: duckdb.DuckDBPyConnection) -> None:
        """Every row of the run: the training tables', its sampled evaluations' and its rejections'."""
        for spec in (EVAL_SAMPLES, EVAL_METRICS, EVAL_COMPARISONS, EVAL_RUNS):
            conn.execute(f"DELETE FROM {spec.name} WHERE eval_id IN "
                         "(SELECT eval_id FROM eval_runs WHERE training_run_id = ?)", [self.run_id])
        for spec in (*TRAINING_TABLES, REJECTED_ROWS):
            conn.execute(f"DELETE FROM {spec.name} WHERE run_id = ?", [self.run_id])


def evaluation_table(evals: Sequence[tuple], types: Sequence[tuple]) -> pd.DataFrame:
    """One row per evaluation (step, phase, wall_s, accuracy, stderr, n, then the accuracy of each question
    type), in the order a run makes them: prior and base, the warm-up and RL evaluations by step, then
    the final one and the control."""
    by_type: dict[tuple[int, str], dict[str, float]] = {}
    for step, phase, kind, accuracy in types:
        by_type.setdefault((step, phase), {})[kind] = accuracy
    rows = [{"step": step, "phase": phase, "wall_s": wall_s, "accuracy": accuracy, "stderr": stderr, "n": n,
             **by_type.get((step, phase), {})}
            for step, phase, wall_s, accuracy, stderr, n in sorted(evals, key=_made_order)]
    return pd.DataFrame(rows)


def _made_order(row: tuple) -> tuple[int, int, int]:
    step, phase = row[0], row[1]
    rank = PHASE_ORDER.index(phase) if phase in PHASE_ORDER else len(PHASE_ORDER)
    return (rank if phase in ("final", "control") else 0, step, rank)
