"""Reliability: the same config and seed give the same rows, generations and scores, run after run.

The rows and one partition are materialized twice, under two benchmark run ids, into one DuckDB
file: the cached synthetic rows are byte-identical, the greedy generations and every score are
identical, and the ``runs`` table records seeds, library versions and input hashes for both runs,
with equal input hashes that match the cached rows. A different seed changes the rows (so the
comparison can fail).
"""

from __future__ import annotations

import importlib.metadata
import json

import dagster as dg
import pyarrow.parquet as pq

from aerorl_pipeline.definitions import build_definitions
from assets.benchmark.reports import input_hashes
from assets.project import benchmark_config
from assets.runs import BENCHMARK_RUN_TAG

PROJECT = build_definitions()  # the shipped config file
ROWS_ASSETS = ("docvqa_rows", "chartqa_rows", "easy_vqa_rows", "arc_rows")  # its [datasets] tables
ROWS_DEFS = [PROJECT.get_assets_def(name) for name in ROWS_ASSETS]
ROW_LIMIT = 2  # conftest's rows per dataset

RUN_A, RUN_B = "determinism-a", "determinism-b"
GENERATED = ("dataset", "sample_id", "prompt", "response", "raw_response", "reference", "claimed_entities",
             "generated_tokens", "prompt_text_tokens", "vision_tokens", "batch_index")
SCORED = ("dataset", "sample_id", "verifier", "grounding", "format", "cost", "total_reward", "passed",
          "manual_pass", "anls", "relaxed_accuracy", "correct", "reward_config", "cell_accuracy")


def row_files(bench) -> dict[str, bytes]:
    return {name: (bench.cache_dir / name / "all.parquet").read_bytes() for name in ROWS_ASSETS}


def cached_hashes(bench) -> dict[str, str]:
    return input_hashes({name: pq.read_table(bench.cache_dir / name / "all.parquet") for name in ROWS_ASSETS})


def stored(bench, table: str, columns: tuple[str, ...], run_id: str) -> list[tuple]:
    return bench.query(f"SELECT {', '.join(columns)} FROM {table} WHERE run_id = ? AND batch_size = 4 "
                       "ORDER BY dataset, sample_id", [run_id])


def test_same_config_and_seed_reproduce_rows_generations_and_scores(bench):
    bench.materialize_rows(RUN_A)
    rows_a = row_files(bench)
    run_a = bench.run_partition(4, RUN_A)
    bench.materialize_rows(RUN_B)
    rows_b = row_files(bench)
    run_b = bench.run_partition(4, RUN_B)

    assert rows_a == rows_b  # byte-identical Parquet: questions, answers, rendered images
    assert run_a.run_id != run_b.run_id
    generations_a = stored(bench, "generations", GENERATED, RUN_A)
    # every configured dataset's rows go through the partition: 2 each of arc, chartqa, docvqa, easy_vqa
    assert [row[0] for row in generations_a] == [name for name in ("arc", "chartqa", "docvqa", "easy_vqa")
                                                 for _ in range(ROW_LIMIT)]
    assert all(row[3] for row in generations_a)  # eight non-empty answers
    assert generations_a == stored(bench, "generations", GENERATED, RUN_B)
    assert stored(bench, "reward_scores", SCORED, RUN_A) == stored(bench, "reward_scores", SCORED, RUN_B)

    runs = {run_id: (json.loads(seeds), json.loads(versions), json.loads(hashes)) for run_id, seeds, versions, hashes
            in bench.query("SELECT run_id, seeds, library_versions, input_hashes FROM runs ORDER BY run_id")}
    assert set(runs) == {RUN_A, RUN_B}
    seed = benchmark_config().seed
    expected_hashes = cached_hashes(bench)
    for seeds, versions, hashes in runs.values():
        assert seeds == {"benchmark": seed, "generation": seed}
        assert versions["torch"] == importlib.metadata.version("torch")
        assert versions["transformers"] == importlib.metadata.version("transformers")
        assert hashes == expected_hashes
    assert runs[RUN_A] == runs[RUN_B]


def test_a_different_seed_changes_the_rows_and_their_input_hash(bench):
    bench.materialize_rows(RUN_A)
    default = row_files(bench)
    hashes = cached_hashes(bench)
    reseeded = {"ops": {name: {"config": {"limit": ROW_LIMIT, "seed": benchmark_config().seed + 1}}
                        for name in ROWS_ASSETS}}
    dg.materialize(ROWS_DEFS, resources=bench.env.resources, instance=bench.env.instance,
                   tags={BENCHMARK_RUN_TAG: RUN_B}, run_config=reseeded)

    changed = row_files(bench)
    assert all(default[name] != changed[name] for name in default)
    rehashed = cached_hashes(bench)
    assert all(hashes[name] != rehashed[name] for name in hashes)
