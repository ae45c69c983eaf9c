"""The judge component in the benchmark: one partition with ``[rewards.judge]`` (the tiny model judging
its own replies) lands a ``judge`` column in DuckDB's ``reward_scores``, weighted into ``total_reward``, and
the judge's grades in ``judge_grades``.

The tiny model's random-init replies hold no grade, so every grade is a counted failure scored
``failure_score`` (0.4 here): total_reward = the rule components' weighted sum + 0.5 x 0.4.
"""

from __future__ import annotations

import json

import dagster as dg
import duckdb
import pytest

from aerorl_pipeline.definitions import build_definitions
from assets.runs import BENCHMARK_RUN_TAG

CONFIG = """
[benchmark]
batch_sizes = [2]
[models.tiny-qwen2-vl]
source = "embedded:tiny-qwen2-vl"
[datasets.easy_vqa]
kind = "easy_vqa"
split = "test"
limit = 2
[rewards.judge]
model = "tiny-qwen2-vl"
weight = 0.5
failure_score = 0.4
max_new_tokens = 3
"""
PARTITION = dg.MultiPartitionKey({"model": "tiny-qwen2-vl", "batch_size": "2"})
RUN = "judge-run"
WEIGHTS = {"verifier": 0.4, "grounding": 0.3, "format": 0.2, "cost": 0.1}


@pytest.fixture(scope="module")
def judged_partition(tmp_path_factory, dagster_env_factory):
    root = tmp_path_factory.mktemp("judge_partition")
    env = dagster_env_factory(root)
    config_path = root / "bench.toml"
    config_path.write_text(CONFIG)
    definitions = build_definitions(config_path, resources=env.resources)
    dg.materialize([definitions.get_assets_def("easy_vqa_rows")], resources=env.resources, instance=env.instance,
                   tags={BENCHMARK_RUN_TAG: RUN})
    result = definitions.resolve_job_def("benchmark").execute_in_process(
        partition_key=PARTITION, instance=env.instance, tags={BENCHMARK_RUN_TAG: RUN},
        run_config={"ops": {"generations": {"config": {"max_new_tokens": 3}}}})
    yield env, result
    env.instance.dispose()


def test_the_judge_column_lands_in_reward_scores_with_its_weight_in_the_total(judged_partition):
    env, result = judged_partition
    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        rows = conn.execute("SELECT verifier, grounding, format, cost, judge, total_reward, reward_config "
                            "FROM reward_scores WHERE run_id = ?", [RUN]).fetchall()
        grades = conn.execute("SELECT judge_key, status, score, raw_reply FROM judge_grades").fetchall()
    assert len(rows) == 2
    for *components, judge, total, config in rows:
        assert judge == 0.4
        rule_total = sum(weight * score for weight, score in zip(WEIGHTS.values(), components, strict=True))
        assert total == pytest.approx(rule_total + 0.5 * 0.4, abs=1e-6)
        assert json.loads(config)["judge"]["model"] == "tiny-qwen2-vl"
    assert len(grades) == 2 and {(key, status, score) for key, status, score, _ in grades} == {
        ("tiny-qwen2-vl", "unparsable", None)}
    metadata = result.asset_materializations_for_node("reward_scores")[0].metadata
    assert (metadata["judge_failures"].value, metadata["judge_calls"].value) == (2, 1)
