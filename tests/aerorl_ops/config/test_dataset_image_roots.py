"""``[datasets.<name>] image_roots``: folders besides the dataset file's own that its image paths may lead
into, resolved against the config file's folder, checked, and passed to the environment."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from aerorl_ops.config.benchmark import ConfigError, parse_benchmark_config
from aerorl_ops.config.dataset_kinds import check_datasets
from aerorl_ops.config.datasets import DATASET_KEYS, DatasetSettings
from aerorl_ops.envs.configured import dataset_env, env_kwargs
from aerorl_ops.envs.registry import dataset_kinds
from aerorl_ops.eval_runner.model_vs_baseline import dataset_record

MINIMAL = {"benchmark": {"batch_sizes": [1]}, "models": {"tiny-qwen2-vl": {"source": "embedded:tiny-qwen2-vl"}}}


def parsed(table: dict, root):
    return check_datasets(parse_benchmark_config({**MINIMAL, "datasets": {"shapes": table}}, path="bench.toml",
                                                 root=root), dataset_kinds()).datasets[0]


@pytest.fixture
def layout(tmp_path):
    """``data/shapes.jsonl`` naming ``../images/red.png`` (outside its folder) and ``red.png`` (inside)."""
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), (255, 0, 0)).save(buffer, format="PNG")
    for folder in ("data", "images"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "red.png").write_bytes(buffer.getvalue())
    lines = [{"id": "out", "question": "Colour?", "answer": "red", "image": "../images/red.png"},
             {"id": "in", "question": "Colour?", "answer": "red", "image": "red.png"}]
    (tmp_path / "data" / "shapes.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return tmp_path


def test_image_roots_are_resolved_against_the_config_folder_and_reach_the_environment(layout):
    dataset = parsed({"kind": "jsonl", "path": "data/shapes.jsonl", "image_roots": ["images"]}, layout)
    assert dataset.image_roots == (str(layout / "images"),) and dict(dataset.settings) == {}
    assert env_kwargs(dataset)["image_roots"] == (str(layout / "images"),)
    assert [item.item_id for item in dataset_env(dataset).items] == ["out", "in"]
    assert dataset_record(dataset)["image_roots"] == [str(layout / "images")]


def test_without_image_roots_the_path_leaving_the_folder_is_a_rejection(layout):
    dataset = parsed({"kind": "jsonl", "path": "data/shapes.jsonl"}, layout)
    assert dataset.image_roots == () and "image_roots" not in env_kwargs(dataset)
    assert "image_roots" not in dataset_record(dataset)  # an eval id without them stays what it was
    env = dataset_env(dataset)
    assert [item.item_id for item in env.items] == ["in"]
    assert [row.reason.split(":")[0] for row in env.rejected] == [
        "image path '../images/red.png' leaves the dataset folder"]


def test_image_roots_is_a_dataset_key_and_part_of_the_hash():
    assert "image_roots" in DATASET_KEYS
    plain = DatasetSettings("s", kind="jsonl", split="test", limit=1, path="x")
    assert hash(plain) != hash(DatasetSettings("s", kind="jsonl", split="test", limit=1, path="x",
                                               image_roots=("/data",)))


@pytest.mark.parametrize(("table", "problem"), [
    ({"kind": "jsonl", "path": "data/shapes.jsonl", "image_roots": "images"},
     "must be a list of non-empty strings, got 'images'"),
    ({"kind": "jsonl", "path": "data/shapes.jsonl", "image_roots": ["nowhere"]}, "which does not exist"),
    ({"kind": "jsonl", "path": "data/shapes.jsonl", "image_roots": ["data/shapes.jsonl"]}, "which is not a folder"),
    ({"kind": "easy_vqa", "image_roots": ["images"]},
     "is not a setting of kind 'easy_vqa': its rows name no image paths (kinds that read them: jsonl, parquet)"),
])
def test_bad_image_roots_name_the_file_and_setting(layout, table, problem):
    with pytest.raises(ConfigError) as error:
        parsed(table, layout)
    assert str(error.value).startswith("bench.toml: setting 'datasets.shapes.image_roots'"), str(error.value)
    assert problem in str(error.value)
