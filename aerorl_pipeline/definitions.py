"""The code location: assembles assets, checks, jobs, schedules and resources. Nothing else.

``build_definitions(config)`` builds them from one config file, or from its settings as a command
resolved them (partitions, run-config defaults, settings, the rows assets of the training and
evaluation environments). ``dagster dev -m aerorl_pipeline.definitions`` loads ``defs``, which reads
the file named by ``$AERORL_CONFIG`` (``aerorl dev --config FILE`` sets it) when it loads, else
``config/benchmark.toml``.
"""

from __future__ import annotations

from aerorl_ops.quiet import quiet_known_logs

quiet_known_logs()  # before the imports below: bitsandbytes logs one of the known lines as it loads
# ruff: noqa: E402

import os
from collections.abc import Mapping
from pathlib import Path

import dagster as dg

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_pipeline.executors import benchmark_executor
from aerorl_pipeline.jobs import build_benchmark_job, checkpoint_evaluation_job, evaluation_job, training_job
from aerorl_pipeline.schedules import build_nightly_schedule
from aerorl_pipeline.sensors import build_automation_sensor, build_checkpoint_sensor, build_pool_slots_sensor
from assets.benchmark.checks import build_benchmark_checks
from assets.benchmark.generation import build_generations
from assets.benchmark.partitions import build_benchmark_partitions
from assets.benchmark.reports import build_benchmark_report
from assets.benchmark.scoring import build_reward_scores
from assets.checkpoints import checkpoints
from assets.datasets.rows import build_rows_assets
from assets.datasets.run_rows import build_run_rows_assets
from assets.evaluation.checkpoint_eval import build_checkpoint_eval
from assets.evaluation.eval_run import build_eval_run
from assets.project import BENCHMARK_CONFIG_PATH, CONFIG_ENV, load_config
from assets.resources import default_resources
from assets.training.checks import rl_run_reward_hacking
from assets.training.rl_run import build_rl_run


def build_definitions(config: str | Path | BenchmarkConfig = BENCHMARK_CONFIG_PATH,
                      resources: Mapping[str, object] | None = None) -> dg.Definitions:
    """Every definition, built from the config file at ``config`` (or its settings, as a command resolved
    them: ``aerorl train``'s flags); ``resources`` replace the default ones (tests point them at a
    temporary folder)."""
    bench = config if isinstance(config, BenchmarkConfig) else load_config(Path(config))
    partitions = build_benchmark_partitions(bench)
    benchmark_job = build_benchmark_job(benchmark_executor(bench.executor))
    return dg.Definitions(
        assets=[*build_rows_assets(bench), *build_run_rows_assets(bench), build_generations(bench, partitions),
                build_reward_scores(bench, partitions),
                build_benchmark_report(bench, partitions), build_rl_run(bench), checkpoints, build_eval_run(bench),
                build_checkpoint_eval(bench)],
        asset_checks=[*build_benchmark_checks(partitions), rl_run_reward_hacking],
        jobs=[benchmark_job, training_job, evaluation_job, checkpoint_evaluation_job],
        schedules=[build_nightly_schedule(partitions, benchmark_job)],
        sensors=[build_automation_sensor(), build_pool_slots_sensor(),
                 build_checkpoint_sensor(bench.eval.follow_checkpoints, checkpoint_evaluation_job)],
        resources=dict(resources) if resources is not None else default_resources(bench.storage),
    )


@dg.definitions
def defs() -> dg.Definitions:
    """The definitions ``dagster dev`` loads: of ``$AERORL_CONFIG`` when set, else the shipped config."""
    return build_definitions(os.environ.get(CONFIG_ENV) or BENCHMARK_CONFIG_PATH)
