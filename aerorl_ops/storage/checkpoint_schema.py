"""The checkpoint tables: every checkpoint a training run saved (``checkpoints``) and the evaluations that
followed one (``checkpoint_evals``: the lineage checkpoint -> eval, joined to ``eval_vs_baseline`` etc. by
``eval_id``)."""

from __future__ import annotations

import pyarrow as pa

from aerorl_ops.storage.schema import TIMESTAMP, TableSpec, required

CHECKPOINTS = TableSpec(
    "checkpoints",
    pa.schema([
        required("run_id", pa.string()),
        required("step", pa.int32()),
        ("checkpoint", pa.string()),  # the reference "<run_id>@<step>", usable wherever a model key is
        ("ordinal", pa.int32()),  # 1 for the run's first checkpoint, 2 for its second, ...
        ("final", pa.bool_()),
        ("path", pa.string()),
        ("content_sha256", pa.string()),
        ("base_model", pa.string()),
        ("held_out_accuracy", pa.float64()),  # the run's held-out evaluation at this step (null: none there)
        ("held_out_n", pa.int32()),
        ("recorded_at", TIMESTAMP),
    ]),
    ("run_id", "step"),
)

CHECKPOINT_EVALS = TableSpec(
    "checkpoint_evals",
    pa.schema([
        required("run_id", pa.string()),
        required("step", pa.int32()),
        required("eval_id", pa.string()),
        ("checkpoint", pa.string()),
        ("content_sha256", pa.string()),
        ("base_model", pa.string()),
        ("dagster_run_id", pa.string()),
        ("evaluated_at", TIMESTAMP),
    ]),
    ("run_id", "step", "eval_id"),
)

CHECKPOINT_TABLES = (CHECKPOINTS, CHECKPOINT_EVALS)
