"""The checkpoint tables: every checkpoint a training run saved (``checkpoints``) and the evaluations that
followed one (``checkpoint_evals``: the lineage checkpoint -> eval, joined to ``eval_vs_baseline`` etc. by
``eval_id``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa

from aerorl_ops.storage.columns import TIMESTAMP, column, record_columns
from aerorl_ops.storage.schema import TableSpec


@dataclass(frozen=True)
class CheckpointRecord:
    """One checkpoint a training run saved: its ``checkpoints`` row, less ``recorded_at`` (when the rows of a
    recording were written, shared by all of them)."""

    run_id: str = column(required=True)
    step: int = column(required=True)
    checkpoint: str  # the reference "<run_id>@<step>", usable wherever a model key is
    ordinal: int  # 1 for the run's first checkpoint, 2 for its second, ...
    final: bool
    path: str
    content_sha256: str
    base_model: str
    held_out_accuracy: float | None  # the run's held-out evaluation at this step (None: none there)
    held_out_n: int | None


CHECKPOINTS = TableSpec("checkpoints", pa.schema([*record_columns(CheckpointRecord), ("recorded_at", TIMESTAMP)]),
                        ("run_id", "step"))


@dataclass(frozen=True)
class CheckpointEvalRow:
    """One evaluation of a checkpoint against its base model: its ``checkpoint_evals`` row, the lineage
    checkpoint -> eval (``eval_id`` names the eval's rows in the ``eval_*`` tables)."""

    run_id: str = column(required=True)
    step: int = column(required=True)
    eval_id: str = column(required=True)  # "<run_id>@<step>/<first 12 of the content hash>"
    checkpoint: str  # the reference "<run_id>@<step>"
    content_sha256: str
    base_model: str  # the baseline the checkpoint was compared with
    dagster_run_id: str  # the run that evaluated it
    evaluated_at: datetime


CHECKPOINT_EVALS = TableSpec("checkpoint_evals", pa.schema(record_columns(CheckpointEvalRow)),
                             ("run_id", "step", "eval_id"))

CHECKPOINT_TABLES = (CHECKPOINTS, CHECKPOINT_EVALS)
