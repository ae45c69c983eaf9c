"""Checkpoint references ``run_id@step`` / ``run_id@latest`` (``models.checkpoint_refs``): parsing,
resolution beside the models folder, one-line errors, and the content hash."""

from __future__ import annotations

import pytest

from aerorl_ops.config.benchmark import ModelEntry, model_entry, parse_benchmark_config
from aerorl_ops.models.checkpoint_refs import (
    CheckpointNotFound,
    CheckpointRef,
    checkpoints_dir,
    content_hash,
    resolve_checkpoint,
)
from aerorl_ops.models.sources import model_source

MINIMAL = {"benchmark": {"batch_sizes": [1]}, "models": {"tiny-qwen2-vl": {"source": "embedded:tiny-qwen2-vl"}}}


def _checkpoint(folder, weights=b"w", complete=True):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(weights)
    if complete:
        (folder / "trainer_state.pt").write_bytes(b"state")
    return folder


@pytest.fixture
def runs(tmp_path):
    """data/models beside data/checkpoints/run-a with steps 2 and 4 complete and step 6 torn."""
    models = tmp_path / "data" / "models"
    models.mkdir(parents=True)
    root = checkpoints_dir(models)
    for step in (2, 4):
        _checkpoint(root / "run-a" / f"step-{step}", weights=bytes([step]))
    _checkpoint(root / "run-a" / "step-6", complete=False)  # killed before its trainer state was written
    return models, root


@pytest.mark.parametrize(("text", "expected"), [
    ("run-a@4", CheckpointRef("run-a", 4)), ("rl.x_1@latest", CheckpointRef("rl.x_1", None)),
    ("tiny-qwen2-vl", None), ("run@", None), ("@4", None), ("run@-1", None), ("a/b@4", None), ("run@4@5", None),
    ("run@" + "9" * 18, CheckpointRef("run", 10**18 - 1)),
    # found by fuzzing: a step past int()'s digit limit raised ValueError; a full-width digit was read as step 1
    ("run@" + "9" * 5000, None), ("run@\uff11", None), ("run@" + "9" * 19, None),
])
def test_references_parse_and_print_back(text, expected):
    assert CheckpointRef.parse(text) == expected
    if expected is not None:
        assert str(expected) == text


def test_a_reference_resolves_beside_the_models_folder_and_latest_skips_a_torn_folder(runs):
    models, root = runs
    assert root == models.parent / "checkpoints"
    assert resolve_checkpoint(CheckpointRef("run-a", 2), root) == root / "run-a" / "step-2"
    assert resolve_checkpoint(CheckpointRef("run-a"), root) == root / "run-a" / "step-4"
    assert model_source(ModelEntry("run-a@latest", "run-a@latest"), models).location == str(root / "run-a" / "step-4")


def test_a_missing_step_or_run_is_one_line_naming_what_there_is(runs):
    models, root = runs
    with pytest.raises(CheckpointNotFound) as missing_step:
        model_source(ModelEntry("run-a@6", "run-a@6"), models)
    assert str(missing_step.value) == ("checkpoint run-a@6 does not exist: run 'run-a' has checkpoints at steps 2, 4 "
                                       "(or run-a@latest)")
    with pytest.raises(CheckpointNotFound, match=r"^checkpoint nope@latest: training run 'nope' has no complete "
                                                 r"checkpoint under .*checkpoints$"):
        resolve_checkpoint(CheckpointRef("nope"), root)


def test_model_entry_takes_a_reference_wherever_a_model_key_goes():
    config = parse_benchmark_config(MINIMAL, path="bench.toml")
    assert model_entry("run-a@latest", config, "base_model") == ModelEntry("run-a@latest", "run-a@latest")


def test_the_content_hash_covers_the_policy_files_not_the_trainer_state(tmp_path):
    one = _checkpoint(tmp_path / "one", weights=b"abc")
    two = _checkpoint(tmp_path / "two", weights=b"abc")
    (two / "trainer_state.pt").write_bytes(b"another optimizer state")
    other = _checkpoint(tmp_path / "other", weights=b"abd")
    assert content_hash(one) == content_hash(two) != content_hash(other)
    assert len(content_hash(one)) == 64


def test_a_models_entry_can_name_a_checkpoint_so_a_benchmark_partition_loads_it(runs):
    models, root = runs
    config = parse_benchmark_config({**MINIMAL, "models": {**MINIMAL["models"], "run-a-latest": {
        "source": "run-a@latest"}}}, path="bench.toml")
    entry = config.model("run-a-latest")
    assert model_source(entry, models).location == str(root / "run-a" / "step-4")


def test_a_missing_folder_inside_a_run_suggests_its_newest_checkpoint(runs):
    models, root = runs
    missing = str(root / "run-a" / "final")  # the folder the README once named: runs write step-N, not final
    with pytest.raises(CheckpointNotFound) as raised:
        model_source(ModelEntry(missing, missing), models)
    assert str(raised.value) == (f"no checkpoint folder {missing}: run 'run-a' has checkpoints run-a@2, run-a@4 "
                                 "(the newest is also run-a@latest): did you mean run-a@4?")
    (root / "run-b").mkdir()
    empty = str(root / "run-b" / "final")
    with pytest.raises(CheckpointNotFound, match=r"^no checkpoint folder .*/run-b/final: training run 'run-b' has "
                                                 r"no complete checkpoint under "):
        model_source(ModelEntry(empty, empty), models)
    existing = str(root / "run-a" / "step-2")  # a folder that exists, and a hub id, pass as they are
    assert model_source(ModelEntry(existing, existing), models).location == existing
    assert model_source(ModelEntry("Qwen/Qwen2-VL-2B-Instruct", "Qwen/Qwen2-VL-2B-Instruct"), models).location == (
        "Qwen/Qwen2-VL-2B-Instruct")
