"""The code location loads, its asset graph shows which rows train and evaluate what, and its schedule asks for
every partition under one benchmark run id."""

from __future__ import annotations

import dataclasses
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
ROWS_ASSETS = {"docvqa_rows", "chartqa_rows", "easy_vqa_rows", "arc_rows"}  # the shipped [datasets] tables
RUN_ROWS = {"training/train_rows", "training/held_out_rows", "training/validation_rows", "evaluation/eval_rows"}


def asset_names(keys) -> set[str]:
    return {key.to_user_string() for key in keys}


def test_every_definition_resolves():
    dg.Definitions.validate_loadable(defs)
    assert asset_names(defs.resolve_all_asset_keys()) == {
        *ROWS_ASSETS, "generations", "reward_scores", "benchmark_report", "rl_run", "checkpoints", "eval_run",
        "checkpoint_eval", *RUN_ROWS}
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


def test_the_graph_leads_from_the_rows_to_training_checkpoints_and_evaluations():
    graph = defs.resolve_asset_graph()

    def upstream(key: str) -> set[str]:
        return asset_names(graph.get(dg.AssetKey.from_user_string(key)).parent_keys)

    assert upstream("generations") == ROWS_ASSETS  # ARC's rows too: each benchmarked dataset is an input
    assert upstream("rl_run") == {"training/train_rows", "training/held_out_rows", "training/validation_rows"}
    assert upstream("checkpoints") == {"rl_run"}
    assert upstream("checkpoint_eval") == {"checkpoints", "evaluation/eval_rows"}
    assert upstream("eval_run") == {"evaluation/eval_rows"}
    assert {name: upstream(name) for name in RUN_ROWS} == {name: set() for name in RUN_ROWS}
    assert {graph.get(dg.AssetKey.from_user_string(name)).group_name for name in RUN_ROWS} == {"datasets"}


def test_each_rows_asset_says_what_it_draws_at_the_config_files_settings():
    graph = defs.resolve_asset_graph()
    descriptions = {name: graph.get(dg.AssetKey.from_user_string(name)).description for name in sorted(RUN_ROWS)}
    assert descriptions == {
        "evaluation/eval_rows": "The items of 'easy_vqa' (kind easy_vqa) read by eval_run and checkpoint_eval: split "
                                "'test', 500 drawn with seed 0; question, answers, image, messages.",
        "training/held_out_rows": "The items of 'easy_vqa' (kind easy_vqa) read by rl_run: split 'test', 500 drawn "
                                  "with seed 0; question, answers, image, messages.",
        "training/train_rows": "The items of 'easy_vqa' (kind easy_vqa) read by rl_run: split 'train', every item; "
                               "question, answers, image, messages.",
        "training/validation_rows": "The items of 'easy_vqa' (kind easy_vqa) read by rl_run: split 'validation', 64 "
                                    "drawn with seed 0; question, answers, image, messages."}


def test_settings_that_name_an_unknown_dataset_make_no_rows_asset_and_still_load():
    bench = benchmark_config()
    other = dataclasses.replace(bench, training=dataclasses.replace(bench.training, env="mnist"),
                                eval=dataclasses.replace(bench.eval, dataset="mnist"))
    graph = build_definitions(other).resolve_asset_graph()
    assert asset_names(graph.get_all_asset_keys()) & RUN_ROWS == set()
    assert asset_names(graph.get(dg.AssetKey("rl_run")).parent_keys) == set()
    assert asset_names(graph.get(dg.AssetKey("checkpoint_eval")).parent_keys) == {"checkpoints"}


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
    assert asset_names(automated) == {*ROWS_ASSETS, *RUN_ROWS}  # the 01:00 refresh
    running = [sensor for sensor in defs.get_repository_def().sensor_defs
               if isinstance(sensor, dg.AutomationConditionSensorDefinition)
               and sensor.default_status == dg.DefaultSensorStatus.RUNNING]
    assert automated <= {key for sensor in running for key in sensor.asset_selection.resolve(graph)}
