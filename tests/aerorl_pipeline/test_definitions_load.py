"""The code location loads, and its schedule asks for every partition under one benchmark run id."""

from __future__ import annotations

import datetime

import dagster as dg

from aerorl_pipeline.definitions import build_definitions
from aerorl_pipeline.schedules import nightly_run_requests
from assets.benchmark.partitions import build_benchmark_partitions
from assets.project import benchmark_config
from assets.runs import BENCHMARK_RUN_TAG

defs = build_definitions()
benchmark_partitions = build_benchmark_partitions(benchmark_config())

BENCHMARK_ASSETS = {"generations", "reward_scores", "benchmark_report"}


def asset_names(keys) -> set[str]:
    return {key.to_user_string() for key in keys}


def test_every_definition_resolves():
    dg.Definitions.validate_loadable(defs)
    assert asset_names(defs.resolve_all_asset_keys()) == {
        "docvqa_rows", "chartqa_rows", "easy_vqa_rows", "generations", "reward_scores", "benchmark_report", "rl_run",
        "checkpoints", "eval_run", "checkpoint_eval"}
    assert defs.resolve_schedule_def("nightly_benchmark").job_name == "benchmark"
    sensor = defs.resolve_sensor_def("checkpoint_evaluations")
    assert sensor.job_name == "checkpoint_evaluation" and sensor.default_status == dg.DefaultSensorStatus.STOPPED
    assert set(defs.resources) >= {"model_runtime", "duckdb", "io_manager"}


def test_jobs_select_their_stage():
    benchmark = defs.resolve_job_def("benchmark")
    assert asset_names(benchmark.asset_layer.executable_asset_keys) == BENCHMARK_ASSETS
    assert benchmark.partitions_def == benchmark_partitions
    training = defs.resolve_job_def("training")
    assert asset_names(training.asset_layer.executable_asset_keys) == {"rl_run"}
    evaluation = defs.resolve_job_def("evaluation")
    assert asset_names(evaluation.asset_layer.executable_asset_keys) == {"eval_run"}
    checkpoint_evaluation = defs.resolve_job_def("checkpoint_evaluation")
    assert asset_names(checkpoint_evaluation.asset_layer.executable_asset_keys) == {"checkpoint_eval"}
    assert checkpoint_evaluation.partitions_def.name == "checkpoints"  # one run per checkpoint


def test_partitions_are_model_by_batch_size_from_the_config():
    config = benchmark_config()
    expected = {dg.MultiPartitionKey({"model": model, "batch_size": str(size)})
                for model in config.model_keys for size in config.batch_sizes}
    assert set(benchmark_partitions.get_partition_keys()) == expected
    assert dg.MultiPartitionKey({"model": "tiny-qwen2-vl", "batch_size": "4"}) in expected


def test_nightly_run_requests_cover_every_partition_with_one_run_tag():
    keys = benchmark_partitions.get_partition_keys()
    requests = nightly_run_requests("2026-01-02", keys)
    assert [r.partition_key for r in requests] == list(keys)
    assert {r.tags[BENCHMARK_RUN_TAG] for r in requests} == {"nightly-2026-01-02"}
    assert len({r.run_key for r in requests}) == len(keys)  # each partition is its own run


def test_the_schedule_tick_requests_every_partition_for_that_night():
    schedule = defs.resolve_schedule_def("nightly_benchmark")
    context = dg.build_schedule_context(
        scheduled_execution_time=datetime.datetime(2026, 3, 4, 2, 0, tzinfo=datetime.UTC),
        repository_def=defs.get_repository_def(),
    )
    requests = schedule.evaluate_tick(context).run_requests
    assert {r.partition_key for r in requests} == set(benchmark_partitions.get_partition_keys())
    assert {r.tags[BENCHMARK_RUN_TAG] for r in requests} == {"nightly-2026-03-04"}


def test_check_names_are_short_and_distinct_where_the_ui_cuts_them():
    names = [key.name for key in defs.resolve_asset_graph().asset_check_keys]
    assert len(names) == 9
    assert max(len(name) for name in names) <= 24, names
    assert len({name[:16] for name in names}) == len(names), names  # the UI shows about 16 characters


def test_every_automated_asset_is_evaluated_by_a_sensor_that_is_on_by_default():
    graph = defs.resolve_asset_graph()
    automated = {key for key in graph.get_all_asset_keys() if graph.get(key).automation_condition is not None}
    assert asset_names(automated) == {"docvqa_rows", "chartqa_rows", "easy_vqa_rows"}  # the 01:00 refresh
    running = [sensor for sensor in defs.get_repository_def().sensor_defs
               if isinstance(sensor, dg.AutomationConditionSensorDefinition)
               and sensor.default_status == dg.DefaultSensorStatus.RUNNING]
    assert automated <= {key for sensor in running for key in sensor.asset_selection.resolve(graph)}
