"""The data in the graph: ``rl_run`` trains on its rows assets, records each one's content hash, and turns
stale (Dagster's data versions) when a dataset it trained on changes, not when its rows are cached again
unchanged. A real tiny run on a user's JSONL dataset, its rows cached as ``aerorl train`` caches them."""

from __future__ import annotations

import io
import json
import uuid

import dagster as dg
import pytest
from dagster._utils.test.data_versions import get_stale_status_resolver
from PIL import Image

from aerorl_ops.envs.cached import items_sha256
from aerorl_ops.rl.run.inputs import training_environments
from aerorl_pipeline.definitions import build_definitions
from aerorl_pipeline.stale_rows import refresh_run_rows, run_rows_to_refresh
from assets.project import load_config
from assets.run_rows import TRAINING_ROWS_KEYS, training_rows
from assets.training.run_parts import rows_extras, rows_of_extras
from tests.assets.training.run_helpers import rl_run_materialization

CONFIG = """
[benchmark]
batch_sizes = [1]

[models.tiny-qwen2-vl]
source = "embedded:tiny-qwen2-vl"

[datasets.shapes]
kind = "jsonl"
path = "shapes.jsonl"
split = "train"
limit = 6

[training]
env = "shapes"
eval_size = 3
warmup_steps = 1
warmup_batch_size = 2
steps = 1
prompts_per_step = 2
group_size = 2
kl_coef = 0.0
control = false
swap_check_type = ""
sampled_eval_size = 0
eval_interval = 10
checkpoint_interval = 100
max_new_tokens = 2

[eval]
dataset = "shapes"
n = 3
"""
TRAIN, HELD_OUT = TRAINING_ROWS_KEYS["training"], TRAINING_ROWS_KEYS["held_out"]


def write_shapes(folder, answers: list[str]) -> None:
    colours = {"red": (255, 0, 0), "blue": (0, 0, 255)}
    lines = []
    for number, answer in enumerate(answers):
        buffer = io.BytesIO()
        Image.new("RGB", (28, 28), colours[answer]).save(buffer, format="PNG")
        (folder / f"{number}.png").write_bytes(buffer.getvalue())
        lines.append(json.dumps({"id": f"s{number}", "question": "What colour?", "answer": answer,
                                 "image": f"{number}.png"}))
    (folder / "shapes.jsonl").write_text("\n".join(lines) + "\n")


def data_version(instance: dg.DagsterInstance, key: dg.AssetKey) -> str:
    return instance.get_latest_materialization_event(key).asset_materialization.tags["dagster/data_version"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory, dagster_env_factory):
    root = tmp_path_factory.mktemp("rl_run_rows")
    (root / "bench.toml").write_text(CONFIG)
    write_shapes(root, ["red", "blue", "red", "blue", "red", "blue", "red"])
    env = dagster_env_factory(root)
    bench = load_config(root / "bench.toml")
    defs = build_definitions(bench, env.resources)
    cached = refresh_run_rows(defs, env.instance, training_rows(bench).values())
    run_name = f"rows-{uuid.uuid4().hex[:8]}"
    result = defs.resolve_job_def("training").execute_in_process(
        instance=env.instance, run_config={"ops": {"rl_run": {"config": {"run_name": run_name}}}})
    yield env, root, bench, defs, cached, result
    env.instance.dispose()


def rl_run_status(env, defs) -> str:
    assets = [defs.get_assets_def(key) for key in (TRAIN, HELD_OUT, dg.AssetKey("rl_run"))]
    return get_stale_status_resolver(env.instance, assets).get_status(dg.AssetKey("rl_run")).value


def test_the_run_trains_on_its_rows_assets_and_records_their_content_hashes(trained):
    env, root, bench, defs, cached, result = trained
    assert cached == [TRAIN, HELD_OUT] and result.success
    train, held_out = training_environments(bench.training, bench.seed + bench.training.seed, bench.datasets)
    metadata = rl_run_materialization(result).metadata
    assert metadata["training_rows_sha256"].value == items_sha256(train.items) == data_version(env.instance, TRAIN)
    assert metadata["held_out_rows_sha256"].value == items_sha256(held_out.items) == data_version(
        env.instance, HELD_OUT)
    table = [line.split("|")[1:-1] for line in metadata["inputs"].value.splitlines()[2:]]
    assert [[cell.strip() for cell in row[:7]] for row in table] == [
        ["training", "shapes", "train", "6", "1000", "cached rows", "6"],
        ["held_out", "shapes", "train", "3", "0", "cached rows", "3"]]
    provenance = rl_run_materialization(result).tags
    assert provenance["dagster/input_data_version/training/train_rows"] == data_version(env.instance, TRAIN)


def test_the_run_turns_stale_when_a_dataset_it_trained_on_changes(trained):
    env, root, bench, defs, _, _ = trained
    assert rl_run_status(env, defs) == "FRESH"
    assert refresh_run_rows(defs, env.instance, training_rows(bench).values()) == []  # cached, unchanged
    version = data_version(env.instance, TRAIN)
    rows = defs.resolve_implicit_global_asset_job_def()
    assert rows.execute_in_process(asset_selection=[TRAIN], instance=env.instance).success  # again, same items
    assert data_version(env.instance, TRAIN) == version and rl_run_status(env, defs) == "FRESH"
    write_shapes(root, ["blue", "blue", "red", "blue", "red", "blue", "red"])  # one answer and image changed
    assert run_rows_to_refresh(env.instance, training_rows(bench).values()) == [TRAIN, HELD_OUT]
    assert rows.execute_in_process(asset_selection=[TRAIN], instance=env.instance).success
    assert data_version(env.instance, TRAIN) != version and rl_run_status(env, defs) == "STALE"


def test_torchrun_ranks_read_the_same_tables_through_the_io_managers_settings(trained):
    env, _, bench, _, _, _ = trained
    keys = {stage: rows.key for stage, rows in training_rows(bench).items()}
    store = env.resources["io_manager"]
    extras = json.loads(json.dumps(rows_extras(store, keys)))  # as Pipes carries it to every rank
    assert extras == {"store": {"base_dir": store.base_dir, "storage_options": {}},
                      "keys": {"training": ["training", "train_rows"], "held_out": ["training", "held_out_rows"]}}
    read = rows_of_extras(extras)
    assert read.keys() == keys.keys()
    assert all(read[stage].equals(store.stored_table(key)) for stage, key in keys.items())
