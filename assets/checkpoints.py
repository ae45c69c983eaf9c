"""The ``checkpoints`` asset: every checkpoint a training run saves, one dynamic partition per
``<run_id>@<step>`` (a reference that loads wherever a model key does).

``rl_run`` records each checkpoint of its run as a materialization of a partition (``record_checkpoints``)
with the step, the run's held-out accuracy there, the folder, its content hash, the base model and the run
id; ``checkpoint_eval`` (evaluation group) evaluates a partition against its base model. Both domains use
these definitions, so they live here, beside the other shared modules.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from aerorl_ops.rl.record.checkpoint_rows import CheckpointRecord
from assets.metadata import readable

CHECKPOINTS_ASSET = "checkpoints"
CHECKPOINT_PARTITIONS = dg.DynamicPartitionsDefinition(name=CHECKPOINTS_ASSET)

checkpoints = dg.AssetSpec(
    CHECKPOINTS_ASSET, deps=["rl_run"], partitions_def=CHECKPOINT_PARTITIONS, group_name="training",
    kinds={"pytorch"},
    description="Every checkpoint a training run saved (partition <run_id>@<step>), recorded by rl_run.")


def checkpoint_metadata(record: CheckpointRecord) -> dict[str, object]:
    return readable({
        "run_id": record.run_id, "step": record.step, "ordinal": record.ordinal, "final": record.final,
        "path": dg.MetadataValue.path(record.path), "content_sha256": record.content_sha256,
        "base_model": record.base_model,
        "held_out_accuracy": dg.MetadataValue.float(record.held_out_accuracy)
        if record.held_out_accuracy is not None else dg.MetadataValue.null(),
        "held_out_n": record.held_out_n if record.held_out_n is not None else dg.MetadataValue.null()})


def record_checkpoints(context: dg.AssetExecutionContext, records: Sequence[CheckpointRecord]) -> None:
    """Each record as a materialization of its ``checkpoints`` partition (added when new)."""
    known = set(context.instance.get_dynamic_partitions(CHECKPOINTS_ASSET))
    new = [r.checkpoint for r in records if r.checkpoint not in known]
    if new:
        context.instance.add_dynamic_partitions(CHECKPOINTS_ASSET, new)
    for record in records:
        context.log_event(dg.AssetMaterialization(CHECKPOINTS_ASSET, partition=record.checkpoint,
                                                  metadata=checkpoint_metadata(record)))
