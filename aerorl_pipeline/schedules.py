"""The nightly benchmark: one run per model x batch-size partition, all sharing one run id."""

from __future__ import annotations

import dagster as dg

from assets.runs import BENCHMARK_RUN_TAG

NIGHTLY_CRON = "0 2 * * *"


def nightly_run_requests(scheduled_for: str, partition_keys: list[str]) -> list[dg.RunRequest]:
    run_id = f"nightly-{scheduled_for}"
    return [
        dg.RunRequest(run_key=f"{run_id}:{key}", partition_key=key, tags={BENCHMARK_RUN_TAG: run_id})
        for key in partition_keys
    ]


def build_nightly_schedule(partitions: dg.PartitionsDefinition,
                           job: dg.UnresolvedAssetJobDefinition) -> dg.ScheduleDefinition:
    """The nightly schedule of ``job`` over every partition of ``partitions`` (those of the config file)."""

    @dg.schedule(job=job, cron_schedule=NIGHTLY_CRON, execution_timezone="UTC",
                 default_status=dg.DefaultScheduleStatus.RUNNING)
    def nightly_benchmark(context: dg.ScheduleEvaluationContext):
        """Every night at 02:00 UTC (the dataset rows refresh at 01:00), benchmark every partition."""
        scheduled = context.scheduled_execution_time.strftime("%Y-%m-%d")
        return nightly_run_requests(scheduled, partitions.get_partition_keys())

    return nightly_benchmark
