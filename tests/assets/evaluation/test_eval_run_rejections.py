"""The evaluation job on a user's JSONL dataset with bad lines: the rejections are logged in one line,
counted in ``eval_runs`` and listed in ``rejected_rows`` under the eval id; a dataset with no usable line
fails the run with one message naming it."""

from __future__ import annotations

import io
import json

import dagster as dg
import duckdb
from PIL import Image

from aerorl_ops.eval_runner.model_vs_baseline import EVAL_STAGE
from aerorl_pipeline.definitions import build_definitions

RUN = {"model": "tiny-qwen2-vl", "baseline": "tiny-qwen2-vl", "dataset": "shapes", "n": 10, "samples": 1, "k": 1,
       "max_new_tokens": 2, "batch_size": 4, "resamples": 20}


def write_dataset(folder, lines: list[dict | bytes]) -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (56, 56), (255, 0, 0)).save(buffer, format="PNG")
    (folder / "red.png").write_bytes(buffer.getvalue())
    (folder / "shapes.jsonl").write_bytes(b"".join(
        (line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n" for line in lines))
    (folder / "bench.toml").write_text(
        '[benchmark]\nbatch_sizes = [1]\n\n[datasets.shapes]\nkind = "jsonl"\npath = "shapes.jsonl"\nsplit = "test"\n'
        'limit = 10\n\n[models.tiny-qwen2-vl]\nsource = "embedded:tiny-qwen2-vl"\n')


def run_eval(env, folder) -> dg.ExecuteInProcessResult:
    job = build_definitions(folder / "bench.toml", env.resources).resolve_job_def("evaluation")
    return job.execute_in_process(instance=env.instance, run_config={"ops": {"eval_run": {"config": RUN}}},
                                  raise_on_error=False)


def test_rejected_lines_are_logged_counted_and_stored(tmp_path, dagster_env):
    write_dataset(tmp_path, [
        {"id": "a", "question": "What colour?", "answer": "red", "image": "red.png"},
        {"id": "b", "question": "What colour?", "image": "red.png"},
        {"id": "c", "question": "What colour?", "answer": "red", "image": "../outside.png"},
        {"id": "a", "question": "What colour?", "answer": "red", "image": "red.png"},
        b"\xff not utf-8"])
    result = run_eval(dagster_env, tmp_path)
    assert result.success
    metadata = result.get_asset_materialization_events()[0].materialization.metadata
    eval_id = metadata["eval_id"].value
    summary = ("4 rows rejected: no answers (1), image path leaves the dataset folder (1), duplicate item id (1), "
               "1 row for 1 other reason")
    assert (metadata["questions"].value, metadata["rejected_rows"].value, metadata["rejections"].value) == (
        1, 4, summary)
    logged = [record.user_message for record in dagster_env.instance.all_logs(result.run_id)
              if "rows rejected" in (record.user_message or "")]
    assert logged == [f"dataset 'shapes': {summary}"]
    with duckdb.connect(str(dagster_env.duckdb_path), read_only=True) as conn:
        assert conn.execute("SELECT role, rejected_rows FROM eval_runs ORDER BY role").fetchall() == [
            ("baseline", 4), ("model", 4)]
        stored = conn.execute("SELECT run_id, stage, dataset, locator, sample_id, reason FROM rejected_rows "
                              "ORDER BY locator").fetchall()
    path = tmp_path / "shapes.jsonl"
    assert [row[:5] for row in stored] == [(eval_id, EVAL_STAGE, "shapes", f"{path}#line={n}", sample)
                                           for n, sample in ((2, "b"), (3, "c"), (4, "a"), (5, "line-5"))]
    assert [row[5].split(":")[0] for row in stored] == [
        "no answers", "image path '../outside.png' leaves the dataset folder",
        f"duplicate item id (first seen at {path}#line=1)", "line is not valid UTF-8 (invalid start byte at byte 0)"]


def test_a_dataset_with_no_usable_line_fails_the_run_naming_it(tmp_path, dagster_env):
    write_dataset(tmp_path, [{"id": "b", "question": "What colour?", "image": "red.png"}])
    result = run_eval(dagster_env, tmp_path)
    assert not result.success
    (failure,) = result.get_step_failure_events()
    path = tmp_path / "shapes.jsonl"
    assert failure.step_failure_data.error.message.strip().endswith(
        f"eval_run config: dataset 'shapes' (file {path}) has no usable row: the 1 row read was rejected: no answers "
        f"(1); the first, {path}#line=1: no answers. Fix the rows, or point the dataset at another file")

