"""The checkpoints a training run saved, as records: where each is, what it holds (a content hash), the
model it started from and the run's held-out accuracy at its step; and their ``checkpoints`` rows.

A record's ``checkpoint`` is its reference ``<run_id>@<step>`` (``models.checkpoint_refs``), which loads
wherever a model key does. ``ordinal`` counts the run's checkpoints in step order from 1, so "every k-th
checkpoint" is ``ordinal % k == 0``; ``final`` marks the one the run ended with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from aerorl_ops.models.checkpoint_refs import STEP_PREFIX, CheckpointRef, content_hash, saved_steps, step_folder
from aerorl_ops.rl.record.recorder import Connect, RunRecorder
from aerorl_ops.storage.checkpoint_schema import CHECKPOINT_TABLES, CHECKPOINTS, CheckpointRecord
from aerorl_ops.storage.duckdb_store import PartitionWrite, ensure_tables, replace_partitions


@dataclass(frozen=True)
class HeldOut:
    """A held-out evaluation of the run's own policy: its step, accuracy and questions."""

    step: int
    accuracy: float
    n: int


def run_checkpoints(run_dir: Path, run_id: str, base_model: str, evaluations: Sequence[HeldOut],
                    final_step: int | None) -> list[CheckpointRecord]:
    """Every complete ``step-N`` checkpoint under ``run_dir``, in step order; ``final_step`` is the step the
    run ended at (None: not ended)."""
    at_step: Mapping[int, HeldOut] = {evaluation.step: evaluation for evaluation in evaluations}
    records = []
    for ordinal, step in enumerate(saved_steps(run_dir), start=1):
        folder = step_folder(run_dir, step)
        held_out = at_step.get(step)
        records.append(CheckpointRecord(
            run_id, step, str(CheckpointRef(run_id, step)), ordinal, step == final_step, str(folder.resolve()),
            content_hash(folder), base_model, None if held_out is None else held_out.accuracy,
            None if held_out is None else held_out.n))
    return records


def checkpoint_writes(records: Sequence[CheckpointRecord], recorded_at: datetime) -> list[PartitionWrite]:
    """The ``checkpoints`` rows of ``records``, one partition per (run, step)."""
    return [PartitionWrite(CHECKPOINTS, {"run_id": r.run_id, "step": r.step},
                           CHECKPOINTS.rows([r], recorded_at=recorded_at)) for r in records]


OWN_POLICY_PHASES = ("warmup", "rl", "final")
"""The held-out evaluations of the run's own policy (not the no-image prior's, not the control's)."""


def record_run_checkpoints(connect: Connect, checkpoints_root: Path, run_id: str, base_model: str,
                           recorded_at: datetime) -> list[CheckpointRecord]:
    """The checkpoints run ``run_id`` saved under ``checkpoints_root``, with its held-out accuracies as the
    report database holds them, written to ``checkpoints`` (replacing the run's earlier rows of those
    steps) and returned."""
    stored = RunRecorder(connect, run_id).stored()
    evaluations, final_step = [], None
    if stored is not None:
        own = stored.evaluations[stored.evaluations["phase"].isin(OWN_POLICY_PHASES)] if len(stored.evaluations) \
            else stored.evaluations
        evaluations = [HeldOut(int(row.step), float(row.accuracy), int(row.n)) for row in own.itertuples()]
        if stored.record.final_checkpoint:
            final_step = int(Path(stored.record.final_checkpoint).name.removeprefix(STEP_PREFIX))
    records = run_checkpoints(Path(checkpoints_root) / run_id, run_id, base_model, evaluations, final_step)
    with connect() as conn:
        ensure_tables(conn, CHECKPOINT_TABLES)
        replace_partitions(conn, checkpoint_writes(records, recorded_at))
    return records
