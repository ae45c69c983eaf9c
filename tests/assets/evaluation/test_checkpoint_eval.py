"""Checkpoints as assets, and the evaluations that follow them: a real tiny training run records each
checkpoint (a ``checkpoints`` row and a materialization of its ``<run_id>@<step>`` partition), the
``checkpoint_evaluations`` sensor (Dagster's sensor test API) requests a run for each one its policy
follows, and the ``checkpoint_evaluation`` job evaluates one against its base model, the lineage in DuckDB."""

from __future__ import annotations

import uuid

import dagster as dg
import duckdb
import pytest

from aerorl_ops.models.checkpoint_refs import checkpoints_dir, content_hash
from aerorl_pipeline.definitions import build_definitions
from aerorl_pipeline.sensors import build_checkpoint_sensor

CONFIG = """
[benchmark]
batch_sizes = [1]

[models.tiny-qwen2-vl]
source = "embedded:tiny-qwen2-vl"

[datasets.easy_vqa]
kind = "easy_vqa"
split = "test"
limit = 48

[eval]
model = "tiny-qwen2-vl"
baseline = "tiny-qwen2-vl"
dataset = "easy_vqa"
n = 4
samples = 2
k = 1
max_new_tokens = 3
batch_size = 16
resamples = 100
follow_checkpoints = "all"
"""
RUN = {"warmup_steps": 2, "warmup_batch_size": 4, "steps": 1, "prompts_per_step": 2, "group_size": 2,
       "eval_size": 6, "eval_interval": 2, "checkpoint_interval": 1, "kl_coef": 0.0, "control": False,
       "swap_check_type": "", "train_limit": 32, "sampled_eval_size": 0}


@pytest.fixture(scope="module")
def trained(tmp_path_factory, dagster_env_factory):
    root = tmp_path_factory.mktemp("checkpoint_eval")
    config = root / "bench.toml"
    config.write_text(CONFIG)
    env = dagster_env_factory(root)
    run_name = f"ckpt-{uuid.uuid4().hex[:8]}"
    definitions = build_definitions(config, env.resources)
    result = definitions.resolve_job_def("training").execute_in_process(
        instance=env.instance, run_config={"ops": {"rl_run": {"config": {**RUN, "run_name": run_name}}}})
    yield env, definitions, result, run_name
    env.instance.dispose()


def test_every_checkpoint_is_a_row_and_a_materialization_of_its_partition(trained):
    env, _, result, run = trained
    folders = checkpoints_dir(env.resources["model_runtime"].models_dir) / run
    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        rows = conn.execute("SELECT step, checkpoint, ordinal, final, path, content_sha256, base_model, "
                            "held_out_accuracy, held_out_n FROM checkpoints WHERE run_id = ? ORDER BY step",
                            [run]).fetchall()
        evals = dict(conn.execute("SELECT step, accuracy FROM training_evals WHERE run_id = ? "
                                  "AND phase IN ('warmup', 'rl', 'final')",
                                  [run]).fetchall())
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [(1, f"{run}@1", 1, False), (2, f"{run}@2", 2, False),
                                                        (3, f"{run}@3", 3, True)]
    for step, _, _, _, path, digest, base, accuracy, n in rows:
        assert path == str((folders / f"step-{step}").resolve()) and digest == content_hash(folders / f"step-{step}")
        assert base == "tiny-qwen2-vl"
        assert (accuracy, n) == ((evals[step], 6) if step in evals else (None, None))  # evaluated at 2 and 3
    assert sorted(evals) == [2, 3] and len({row[5] for row in rows}) == 3  # each step's weights differ

    materialized = {event.partition: event.metadata
                    for event in result.asset_materializations_for_node("rl_run")
                    if event.asset_key == dg.AssetKey("checkpoints")}
    assert sorted(materialized) == [f"{run}@1", f"{run}@2", f"{run}@3"]
    final = materialized[f"{run}@3"]
    assert (final["step"].value, final["final"].value, final["run_id"].value, final["base_model"].value) == (
        3, True, run, "tiny-qwen2-vl")
    assert final["content_sha256"].value == rows[2][5] and final["held_out_accuracy"].value == evals[3]
    assert sorted(env.instance.get_dynamic_partitions("checkpoints")) == sorted(materialized)


@pytest.mark.parametrize(("policy", "evaluated"), [("all", [1, 2, 3]), ("final", [3]), ("every-2", [2])])
def test_the_sensor_requests_the_checkpoints_its_policy_follows_once(trained, policy, evaluated):
    env, definitions, _, run = trained
    sensor = build_checkpoint_sensor(policy, definitions.resolve_job_def("checkpoint_evaluation"))
    first = sensor(dg.build_sensor_context(instance=env.instance))
    assert [request.partition_key for request in first.run_requests] == [f"{run}@{step}" for step in evaluated]
    assert all(request.run_key.startswith(f"{request.partition_key}:") and len(request.run_key.split(":")[1]) == 64
               for request in first.run_requests)  # the content hash: a rewritten checkpoint is evaluated again
    again = sensor(dg.build_sensor_context(instance=env.instance, cursor=first.cursor))
    assert again.run_requests == [] and again.cursor == first.cursor


def test_a_checkpoint_is_evaluated_against_its_base_model_with_its_lineage(trained):
    env, definitions, _, run = trained
    key = f"{run}@3"
    result = definitions.resolve_job_def("checkpoint_evaluation").execute_in_process(
        instance=env.instance, partition_key=key)
    assert result.success
    (materialization,) = result.asset_materializations_for_node("checkpoint_eval")
    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        (digest,) = conn.execute("SELECT content_sha256 FROM checkpoints WHERE run_id = ? AND step = 3",
                                 [run]).fetchone()
        lineage = conn.execute("SELECT checkpoint, eval_id, base_model, dagster_run_id FROM checkpoint_evals "
                               "WHERE run_id = ?", [run]).fetchall()
        roles = conn.execute("SELECT role, model, model_source, questions FROM eval_runs WHERE eval_id = ? "
                             "ORDER BY role", [f"{key}/{digest[:12]}"]).fetchall()
        compared = conn.execute("SELECT count(*) FROM eval_vs_baseline WHERE eval_id = ?",
                                [f"{key}/{digest[:12]}"]).fetchone()[0]
    assert lineage == [(key, f"{key}/{digest[:12]}", "tiny-qwen2-vl", result.run_id)]
    folder = checkpoints_dir(env.resources["model_runtime"].models_dir) / run / "step-3"
    assert roles == [("baseline", "tiny-qwen2-vl", str(env.resources["model_runtime"].models_dir) + "/tiny-qwen2-vl",
                      4), ("model", key, str(folder), 4)]
    assert compared > 0
    assert materialization.partition == key and materialization.metadata["eval_id"].value == f"{key}/{digest[:12]}"
