"""One benchmark partition end to end: rows -> generations -> reward_scores -> benchmark_report.

The real definitions (assets, the ``benchmark`` job) run with isolated resources: the session's
tiny model, a DuckDB file and a Parquet cache under tmp, an ephemeral instance. The assertions
read what landed in DuckDB and in the Parquet cache.
"""

from __future__ import annotations

import importlib.metadata
import json

import dagster as dg
import duckdb
import pyarrow.parquet as pq
import pytest

from aerorl_ops.generation.partition_run import partition_stats
from aerorl_ops.scoring.partition_scores import score_generations
from aerorl_pipeline.definitions import build_definitions
from assets.project import benchmark_config
from assets.runs import BENCHMARK_RUN_TAG

PARTITION = dg.MultiPartitionKey({"model": "tiny-qwen2-vl", "batch_size": "4"})
ROWS_ASSETS = ("docvqa_rows", "chartqa_rows", "easy_vqa_rows", "arc_rows")  # the shipped [datasets]
ROWS_RUN_CONFIG = {"ops": {name: {"config": {"limit": 2}} for name in ROWS_ASSETS}}
ROWS = 8  # 2 per dataset x 4 datasets
ARC_MAX_NEW_TOKENS = 128  # [datasets.arc] max_new_tokens: ARC's rows keep it when the run config sets 4
GENERATION_RUN_CONFIG = {"ops": {"generations": {"config": {"max_new_tokens": 4}}}}
RUN_A = "test-run-a"
RUN_B = "test-run-b"
TABLES = ("generations", "reward_scores", "benchmark_summary")


def run_partition(env, run_tag: str) -> dg.ExecuteInProcessResult:
    """The ``benchmark`` job of the real definitions, with the test resources swapped in."""
    job = build_definitions(resources=env.resources).resolve_job_def("benchmark")
    return job.execute_in_process(partition_key=PARTITION, instance=env.instance,
                                  tags={BENCHMARK_RUN_TAG: run_tag}, run_config=GENERATION_RUN_CONFIG)


def query(env, sql: str, params: list | None = None) -> list[tuple]:
    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        return conn.execute(sql, params or []).fetchall()


def counts(env, run_id: str) -> dict[str, int]:
    found = {table: query(env, f"SELECT count(*) FROM {table} WHERE run_id = ?", [run_id])[0][0]
             for table in TABLES}
    found["runs"] = query(env, "SELECT count(*) FROM runs WHERE run_id = ?", [run_id])[0][0]
    return found


@pytest.fixture(scope="module")
def benchmarked(tmp_path_factory, dagster_env_factory):
    """Rows (2 + 2 + 2 + 2) materialized, then partition (tiny-qwen2-vl, 4) benchmarked under RUN_A."""
    env = dagster_env_factory(tmp_path_factory.mktemp("benchmark_partition"))
    rows = [build_definitions().get_assets_def(name) for name in ROWS_ASSETS]
    rows_result = dg.materialize(rows, resources=env.resources, instance=env.instance,
                                 tags={BENCHMARK_RUN_TAG: RUN_A}, run_config=ROWS_RUN_CONFIG)
    input_ids = [sample_id for name in ROWS_ASSETS
                 for sample_id in rows_result.output_for_node(name).column("sample_id").to_pylist()]
    job_result = run_partition(env, RUN_A)
    yield env, input_ids, job_result
    env.instance.dispose()


def cached_generations(env):
    paths = sorted((env.cache_dir / "generations").glob("*.parquet"))
    assert len(paths) == 1, paths
    return pq.read_table(paths[0])


def test_generations_rows_are_keyed_by_partition_and_cover_the_input(benchmarked):
    env, input_ids, job_result = benchmarked
    assert len(input_ids) == ROWS and len(set(input_ids)) == ROWS
    rows = query(env, "SELECT run_id, model_key, batch_size, sample_id, dagster_run_id, generated_tokens, dataset "
                      "FROM generations")
    assert len(rows) == ROWS
    assert {(run_id, model, size) for run_id, model, size, *_ in rows} == {(RUN_A, "tiny-qwen2-vl", 4)}
    assert sorted(row[3] for row in rows) == sorted(input_ids)
    assert {row[4] for row in rows} == {job_result.run_id}
    assert all(1 <= row[5] <= 4 for row in rows if row[6] != "arc")  # max_new_tokens=4 from the run config
    assert all(4 < row[5] <= ARC_MAX_NEW_TOKENS for row in rows if row[6] == "arc")  # the random model runs on


def test_duckdb_generations_equal_the_cached_parquet(benchmarked):
    env, _, _ = benchmarked
    cached = {r["sample_id"]: r for r in cached_generations(env).to_pylist()}
    stored = query(env, "SELECT sample_id, response, raw_response, generated_tokens, batch_index, reference "
                        "FROM generations WHERE run_id = ?", [RUN_A])
    assert len(cached) == len(stored) == ROWS
    for sample_id, response, raw, tokens, batch_index, reference in stored:
        record = cached[sample_id]
        assert (response, raw, tokens, batch_index, reference) == (
            record["response"], record["raw_response"], record["generated_tokens"], record["batch_index"],
            record["reference"])
    prompts = {r["dataset"]: r["prompt"] for r in cached.values()}
    assert prompts["easy_vqa"].endswith("\nAnswer with one word.")  # each dataset asks its own way
    assert prompts["docvqa"].endswith('{"answer": "<answer>"} and nothing else.')
    # at batch size 4: docvqa and chartqa in batch 0, easy_vqa in batch 1, then ARC's rows (their own
    # max_new_tokens) after the others, in a batch of their own: the partition's third
    batches = sorted({(r["dataset"], r["batch_index"]) for r in cached.values()})
    assert batches == [("arc", 2), ("chartqa", 0), ("docvqa", 0), ("easy_vqa", 1)]


def test_reward_scores_match_score_generations_on_the_cache(benchmarked):
    env, _, _ = benchmarked
    expected = score_generations(cached_generations(env), benchmark_config().rewards).to_pylist()
    stored = dict(query(env, "SELECT sample_id, total_reward FROM reward_scores WHERE run_id = ? "
                             "AND model_key = 'tiny-qwen2-vl' AND batch_size = 4", [RUN_A]))
    assert len(stored) == ROWS
    assert stored == {r["sample_id"]: r["total_reward"] for r in expected}


def test_one_summary_row_per_dataset_and_one_runs_row(benchmarked):
    env, _, _ = benchmarked
    stats = partition_stats(cached_generations(env))  # the stats survive the Parquet round trip
    assert (stats.batch_size, stats.samples, stats.device) == (4, ROWS, "cpu")
    summary = query(env, "SELECT dataset, samples, model_source, device, pass_rate, accuracy, wall_s "
                         "FROM benchmark_summary WHERE run_id = ? AND model_key = 'tiny-qwen2-vl' AND batch_size = 4 "
                         "ORDER BY dataset", [RUN_A])
    assert [row[0] for row in summary] == ["arc", "chartqa", "docvqa", "easy_vqa"]
    scores = query(env, "SELECT dataset, passed, correct FROM reward_scores WHERE run_id = ?", [RUN_A])
    for dataset, samples, model_source, device, pass_rate, accuracy, _ in summary:
        mine = [(passed, correct) for name, passed, correct in scores if name == dataset]
        assert (samples, model_source, device) == (2, stats.model_source, "cpu")
        assert pass_rate == pytest.approx(sum(passed for passed, _ in mine) / 2)
        assert accuracy == sum(correct for _, correct in mine) / 2  # exact: the mean of two stored flags
    assert sum(row[6] for row in summary) == pytest.approx(stats.wall_s)  # the datasets share the partition's time
    assert summary[0][2].endswith("tiny-qwen2-vl")

    runs = query(env, "SELECT kind, library_versions, input_hashes, started_at <= finished_at, config FROM runs "
                      "WHERE run_id = ?", [RUN_A])
    assert len(runs) == 1
    kind, versions, hashes, ordered, config = runs[0]
    assert kind == "benchmark" and ordered
    assert json.loads(config)["dataset_max_new_tokens"] == {"arc": 128}  # beside generation's 4 (the run config)
    assert json.loads(versions)["torch"] == importlib.metadata.version("torch")
    assert set(json.loads(hashes)) == set(ROWS_ASSETS)


def test_each_datasets_wall_time_is_its_share_of_its_batches_time(benchmarked):
    """Batch size 4: docvqa and chartqa fill the first batch, easy_vqa the second, ARC's rows a third of their
    own; each batch's time is split among its rows, then scaled so the datasets add up to the partition's."""
    env, _, _ = benchmarked
    stats = partition_stats(cached_generations(env))
    batch_ms = {r["dataset"]: r["batch_latency_ms"] for r in cached_generations(env).to_pylist()}
    assert batch_ms["docvqa"] == batch_ms["chartqa"]  # one batch, one time
    scale = stats.wall_s / (batch_ms["docvqa"] + batch_ms["easy_vqa"] + batch_ms["arc"])
    wall = dict(query(env, "SELECT dataset, wall_s FROM benchmark_summary WHERE run_id = ?", [RUN_A]))
    assert wall == pytest.approx({"docvqa": batch_ms["docvqa"] / 2 * scale, "chartqa": batch_ms["chartqa"] / 2 * scale,
                                  "easy_vqa": batch_ms["easy_vqa"] * scale, "arc": batch_ms["arc"] * scale}, rel=1e-9)


def test_runs_row_records_the_generation_settings_actually_used(benchmarked):
    """The run config set max_new_tokens=4; the runs row must not claim the file's default (24)."""
    env, _, _ = benchmarked
    (config,), = query(env, "SELECT config FROM runs WHERE run_id = ?", [RUN_A])
    assert json.loads(config)["generation"]["max_new_tokens"] == 4


def test_rerun_replaces_the_partition_and_a_new_run_tag_adds_one(benchmarked):
    env, input_ids, _ = benchmarked
    before = counts(env, RUN_A)
    assert before == {"generations": ROWS, "reward_scores": ROWS, "benchmark_summary": 4, "runs": 1}  # 4 datasets
    (first_start, first_finish), = query(env, "SELECT started_at, finished_at FROM runs WHERE run_id = ?", [RUN_A])

    rerun = run_partition(env, RUN_A)
    assert counts(env, RUN_A) == before
    assert {r[0] for r in query(env, "SELECT DISTINCT dagster_run_id FROM generations WHERE run_id = ?",
                                [RUN_A])} == {rerun.run_id}
    (start, finish), = query(env, "SELECT started_at, finished_at FROM runs WHERE run_id = ?", [RUN_A])
    assert start <= first_start and finish > first_finish  # the run's window widened, one row kept

    run_partition(env, RUN_B)
    assert counts(env, RUN_A) == before
    assert counts(env, RUN_B) == before
    assert sorted(r[0] for r in query(env, "SELECT sample_id FROM generations WHERE run_id = ?", [RUN_B])) \
        == sorted(input_ids)
    assert query(env, "SELECT count(*) FROM generations")[0][0] == 2 * ROWS


def test_reward_override_rescores_the_cached_generations_without_regenerating(benchmarked):
    env, _, _ = benchmarked
    generations_file = next((env.cache_dir / "generations").glob("*.parquet"))
    generated_at = generations_file.stat().st_mtime_ns
    verifier_only = {"verifier": 1.0, "grounding": 0.0, "format": 0.0, "cost": 0.0}
    result = dg.materialize(
        build_definitions().assets, selection=["reward_scores"], partition_key=PARTITION, resources=env.resources,
        instance=env.instance, tags={BENCHMARK_RUN_TAG: RUN_A},
        run_config={"ops": {"reward_scores": {"config": {"weights": verifier_only, "pass_threshold": 0.9}}}},
    )
    scores = result.output_for_node("reward_scores").to_pylist()
    assert len(scores) == ROWS
    assert all(s["total_reward"] == s["verifier"] for s in scores)
    assert all(s["passed"] == (s["verifier"] >= 0.9) for s in scores)
    assert json.loads(scores[0]["reward_config"])["weights"] == verifier_only
    assert generations_file.stat().st_mtime_ns == generated_at
