"""The sensors: ``automation_conditions``, which runs the assets' automation conditions (the rows' 01:00
refresh), ``pool_slots``, which frees the pool slots of dead runs, and ``checkpoint_evaluations``.

``pool_slots`` is on by default: every 30 s it marks failed each run whose process is gone and frees the pool
slots of runs that can no longer free them (``aerorl_pipeline.pool_slots``), so a run launched from the UI or by
the nightly schedule never waits for a slot held by a killed process. The command line does the same each time it
opens the instance.

``automation_conditions`` is on by default, so the rows refresh whenever ``dagster-daemon`` runs (``aerorl
dev`` starts one). Dagster's own ``default_automation_condition_sensor``, which it adds when no sensor
covers an automated asset, is off until someone turns it on in the UI.

``checkpoint_evaluations``: each new checkpoint a training run records is evaluated against
its base model (the ``checkpoint_evaluation`` job, one run per ``checkpoints`` partition).

Off by default (turn it on in the UI's Automation tab, or ``dagster sensor start checkpoint_evaluations``;
``dagster-daemon`` runs it). Each tick reads the ``checkpoints`` materializations recorded since its cursor
(a storage id) in order, and requests a run for those the config file's ``[eval] follow_checkpoints``
picks: every one, each run's final one, or every k-th. A request's run key is the checkpoint and its
content hash, so a checkpoint recorded again unchanged is not evaluated again, and one whose folder was
rewritten (a run started over) is.
"""

from __future__ import annotations

import dagster as dg

from aerorl_ops.config.evaluation import follows
from aerorl_pipeline.instance import fail_abandoned_runs
from aerorl_pipeline.pool_slots import free_dead_runs_slots
from assets.checkpoints import CHECKPOINTS_ASSET

AUTOMATION_SENSOR = "automation_conditions"
CHECKPOINT_SENSOR = "checkpoint_evaluations"
POOL_SLOTS_SENSOR = "pool_slots"
RECORDS_PER_TICK = 100


def build_automation_sensor() -> dg.AutomationConditionSensorDefinition:
    """The sensor that evaluates every asset's automation condition, running from the start."""
    return dg.AutomationConditionSensorDefinition(
        AUTOMATION_SENSOR, target=dg.AssetSelection.all(), default_status=dg.DefaultSensorStatus.RUNNING,
        description="Evaluates the assets' automation conditions: the dataset rows refresh at 01:00 UTC.")


def build_pool_slots_sensor() -> dg.SensorDefinition:
    """The sensor that fails abandoned runs and frees their pool slots, running from the start."""

    @dg.sensor(name=POOL_SLOTS_SENSOR, default_status=dg.DefaultSensorStatus.RUNNING, minimum_interval_seconds=30)
    def pool_slots(context: dg.SensorEvaluationContext) -> dg.SkipReason:
        """Marks failed each run whose process is gone and frees the pool slots no live run can free."""
        failed = fail_abandoned_runs(context.instance)
        freed = free_dead_runs_slots(context.instance)
        return dg.SkipReason(f"runs marked failed: {failed or 'none'}; runs whose pool slots were freed: "
                             f"{freed or 'none'}")

    return pool_slots


def checkpoint_run_requests(instance: dg.DagsterInstance, cursor: str | None, policy: str
                            ) -> tuple[list[dg.RunRequest], str | None]:
    """The run requests for the checkpoints recorded after ``cursor`` that ``policy`` follows, and the new cursor."""
    after = int(cursor) if cursor else None
    found = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(CHECKPOINTS_ASSET), after_storage_id=after),
        limit=RECORDS_PER_TICK, ascending=True)
    requests = []
    for record in found.records:
        event = record.asset_materialization
        metadata = event.metadata
        if follows(policy, int(metadata["ordinal"].value), bool(metadata["final"].value)):
            requests.append(dg.RunRequest(run_key=f"{event.partition}:{metadata['content_sha256'].value}",
                                          partition_key=event.partition))
        after = record.storage_id
    return requests, None if after is None else str(after)


def build_checkpoint_sensor(policy: str, job: dg.UnresolvedAssetJobDefinition) -> dg.SensorDefinition:
    """The sensor launching ``job`` for the checkpoints ``policy`` (``[eval] follow_checkpoints``) follows."""

    @dg.sensor(name=CHECKPOINT_SENSOR, job=job, default_status=dg.DefaultSensorStatus.STOPPED,
               minimum_interval_seconds=30)
    def checkpoint_evaluations(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        """Evaluates each new training checkpoint ([eval] follow_checkpoints picks which) against its base model."""
        requests, cursor = checkpoint_run_requests(context.instance, context.cursor, policy)
        return dg.SensorResult(run_requests=requests, cursor=cursor or context.cursor)

    return checkpoint_evaluations
