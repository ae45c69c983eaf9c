"""The code location: assembles assets, checks, jobs, schedules and resources. Nothing else."""

from __future__ import annotations

import dagster as dg

from aerorl_pipeline.jobs import benchmark_job, training_job
from aerorl_pipeline.schedules import nightly_benchmark
from assets.checks import benchmark_checks
from assets.datasets import chartqa_rows, docvqa_rows
from assets.generation import generations
from assets.reports import benchmark_report
from assets.resources import default_resources
from assets.scoring import reward_scores
from assets.training import rl_run

defs = dg.Definitions(
    assets=[docvqa_rows, chartqa_rows, generations, reward_scores, benchmark_report, rl_run],
    asset_checks=benchmark_checks,
    jobs=[benchmark_job, training_job],
    schedules=[nightly_benchmark],
    resources=default_resources(),
)
