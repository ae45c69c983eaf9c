"""``eval_run`` reads its questions from ``evaluation/eval_rows`` when that holds what its settings draw, and
says where they came from with their content hash; a run config that draws another sample reads the source."""

from __future__ import annotations

import dagster as dg

from aerorl_pipeline.definitions import build_definitions
from aerorl_pipeline.stale_rows import refresh_run_rows
from assets.project import load_config
from assets.run_rows import EVAL_ROWS_KEY, eval_rows
from tests.assets.training.test_rl_run_rows import write_shapes

CONFIG = """
[benchmark]
batch_sizes = [1]

[models.tiny-qwen2-vl]
source = "embedded:tiny-qwen2-vl"

[datasets.shapes]
kind = "jsonl"
path = "shapes.jsonl"
split = "test"
limit = 6

[eval]
dataset = "shapes"
n = 3
samples = 1
k = 1
max_new_tokens = 2
batch_size = 4
resamples = 20
"""


def evaluation(env, defs, **config) -> dg.AssetMaterialization:
    result = defs.resolve_job_def("evaluation").execute_in_process(
        instance=env.instance, run_config={"ops": {"eval_run": {"config": config}}})
    (event,) = result.get_asset_materialization_events()
    return event.materialization


def test_the_questions_come_from_the_eval_rows_when_they_hold_what_the_settings_draw(tmp_path, dagster_env):
    (tmp_path / "bench.toml").write_text(CONFIG)
    write_shapes(tmp_path, ["red", "blue", "red", "blue", "red"])
    bench = load_config(tmp_path / "bench.toml")
    defs = build_definitions(bench, dagster_env.resources)
    assert refresh_run_rows(defs, dagster_env.instance, [eval_rows(bench)]) == [EVAL_ROWS_KEY]
    version = dagster_env.instance.get_latest_materialization_event(EVAL_ROWS_KEY).asset_materialization.tags[
        "dagster/data_version"]

    cached = evaluation(dagster_env, defs).metadata
    assert (cached["questions"].value, cached["questions_from"].value) == (3, "cached rows (evaluation/eval_rows)")
    assert cached["questions_sha256"].value == version

    other = evaluation(dagster_env, defs, n=2).metadata
    assert (other["questions"].value, other["questions_from"].value) == (
        2, "source: the cached rows were drawn from another source: its settings changed (limit 3 -> 2)")
    assert other["questions_sha256"].value != version
