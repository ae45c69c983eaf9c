"""One name per idea: the old module names are gone, and the one resolver of a model name and the one
of an environment name say, in one line, what they were given and what they know."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from aerorl_ops.config.benchmark import ConfigError, model_entry, parse_benchmark_config
from aerorl_ops.config.dataset_kinds import DatasetKinds, check_datasets
from aerorl_ops.envs.configured import named_env
from aerorl_ops.envs.registry import dataset_kinds

MINIMAL = {"benchmark": {"batch_sizes": [1]}, "models": {"tiny-qwen2-vl": {"source": "embedded:tiny-qwen2-vl"}}}


@pytest.mark.parametrize("name", ["aerorl_ops.evaluator", "aerorl_ops.evaluation", "aerorl_ops.envs.exact_match",
                                  "aerorl_ops.rl.held_out", "aerorl_ops.rewards.records",
                                  "aerorl_ops.generation.records", "aerorl_ops.eval_runner.inputs"])
def test_the_old_module_names_are_gone(name):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(name)


ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("aerorl_ops", "assets", "aerorl_pipeline")


def top_level_definitions(name: str) -> list[str]:
    """The modules of the project's packages that define ``name`` at their top level (def, class or assignment)."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.parse(path.read_text(), str(path)).body:
                if isinstance(node, ast.FunctionDef | ast.ClassDef):
                    names = [node.name]
                elif isinstance(node, ast.Assign | ast.AnnAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names = [t.id for t in targets if isinstance(t, ast.Name)]
                else:
                    continue
                if name in names:
                    found.append(path.relative_to(ROOT).with_suffix("").as_posix().replace("/", "."))
    return found


@pytest.mark.parametrize(("name", "where"), [
    ("ALGORITHMS", ["aerorl_ops.config.algorithms"]),
    ("load_config", ["assets.project"]),
    ("Graded", ["aerorl_ops.eval_runner.episodes"]),
    ("materialize_rows", ["aerorl_pipeline.bench"]),
    ("Recipe", ["aerorl_ops.config.training"]),
    ("POLICY_LOSSES", ["aerorl_ops.config.algorithms"]),
    ("resolved_settings", []),  # a run's settings resolve once: TrainingSettings.resolve
    ("OWN_AGGREGATION", []),  # a loss's own aggregation is registered with it: rl.core.registry
])
def test_one_idea_is_defined_under_its_name_once(name, where):
    """Issue 32: each of these was defined twice (or is gone); the other one was renamed for what it does."""
    assert top_level_definitions(name) == where


def test_a_model_key_resolves_to_its_entry_and_a_folder_to_itself(tmp_path):
    config = parse_benchmark_config(MINIMAL, path="bench.toml")
    assert model_entry("tiny-qwen2-vl", config).source == "embedded:tiny-qwen2-vl"
    folder = model_entry(str(tmp_path), config)
    assert (folder.key, folder.source) == (str(tmp_path.resolve()), str(tmp_path.resolve()))


def test_an_unknown_model_is_one_line_naming_it_the_file_and_the_keys(tmp_path):
    config = parse_benchmark_config(MINIMAL, path="bench.toml")
    with pytest.raises(ConfigError) as raised:
        model_entry(str(tmp_path / "missing"), config, "baseline")
    assert str(raised.value) == (f"baseline {str(tmp_path / 'missing')!r} is neither a model key of bench.toml "
                                 "(tiny-qwen2-vl), a checkpoint run_id@step / run_id@latest, nor a checkpoint "
                                 "directory")


def test_an_unknown_environment_is_one_line_listing_kinds_and_datasets():
    config = parse_benchmark_config(MINIMAL, path="bench.toml")
    with pytest.raises(ConfigError) as raised:
        named_env("shapes", config.datasets, split="test", limit=2, seed=0, role="eval environment")
    assert str(raised.value) == ("eval environment 'shapes' is neither an environment kind (arc, chartqa, docvqa, "
                                 "easy_vqa, easy_vqa_combinations, easy_vqa_pairs, easy_vqa_two_tries, gymnasium, "
                                 "jsonl, mixture, parquet) nor a configured dataset (chartqa, docvqa, easy_vqa)")
    assert "\n" not in str(raised.value)


def test_a_kind_and_a_configured_dataset_both_resolve(tmp_path):
    (tmp_path / "qa.jsonl").write_text('{"question": "What?", "answer": "yes", "image": "x.png"}\n')
    (tmp_path / "x.png").write_bytes(_png())
    data = {**MINIMAL, "datasets": {"mine": {"kind": "jsonl", "path": "qa.jsonl", "split": "test"}}}
    config = check_datasets(parse_benchmark_config(data, path="bench.toml", root=tmp_path), dataset_kinds())
    mine = named_env("mine", config.datasets, split="ignored", limit=None, seed=0)
    assert [item.question for item in mine.items] == ["What?"]
    kind = named_env("easy_vqa", config.datasets, split="test", limit=3, seed=0)
    assert len(kind) == 3 and kind.name == "easy_vqa"


def test_the_dataset_check_takes_the_kinds_it_is_given(tmp_path):
    (tmp_path / "qa.jsonl").write_text("")
    data = {**MINIMAL, "datasets": {"mine": {"kind": "jsonl", "path": "qa.jsonl"}}}
    config = parse_benchmark_config(data, path="bench.toml", root=tmp_path)
    with pytest.raises(ConfigError, match=r"^bench.toml: setting 'datasets.mine.kind' names no environment kind: "
                                          r"'jsonl'; known kinds: easy_vqa, parquet$"):
        check_datasets(config, DatasetKinds({"parquet": ("path",), "easy_vqa": ("split",)}))
    assert check_datasets(config, dataset_kinds()) is config


def _png() -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.parametrize("name", ["aerorl_ops.eval_runner.episodes", "aerorl_ops.config.dataset_kinds"])
def test_docstring_examples_of_the_new_modules(name):
    import doctest

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
