"""Training environments from settings: registry kinds, and a user's own JSONL dataset from the config."""

from __future__ import annotations

import dataclasses
import io
import json

import pytest
from PIL import Image

from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.config.training import TRAINING_DEFAULTS
from aerorl_ops.rl.run.inputs import training_environments
from aerorl_ops.rl.run.phases import run_training

COLOURS = {"red": (255, 0, 0), "blue": (0, 0, 255), "green": (0, 160, 0)}


def shapes_dataset(folder, name: str, answers: list[str]) -> DatasetSettings:
    lines = []
    for number, answer in enumerate(answers):
        image = folder / "images" / f"{name}-{number}.png"
        image.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        Image.new("RGB", (8, 8), COLOURS[answer]).save(buffer, format="PNG")
        image.write_bytes(buffer.getvalue())
        lines.append(json.dumps({"id": f"{name}{number}", "question": "What colour is the shape?", "answer": answer,
                                 "image": f"images/{image.name}"}))
    lines.append(json.dumps({"id": f"{name}-bad", "question": "What colour?", "answer": "red",
                             "image": "images/missing.png"}))
    path = folder / f"{name}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return DatasetSettings(name=name, kind="jsonl", split=name, limit=0, path=str(path))


def test_env_and_eval_env_name_configured_datasets(tmp_path):
    train_set = shapes_dataset(tmp_path, "shapes_train", ["red", "blue", "green", "red", "blue"])
    test_set = shapes_dataset(tmp_path, "shapes_test", ["green", "red", "blue"])
    settings = dataclasses.replace(TRAINING_DEFAULTS, env="shapes_train", eval_env="shapes_test", eval_size=10)
    train, held_out = training_environments(settings, 0, [train_set, test_set])
    assert len(train) == 5 and len(held_out) == 3 and len(held_out.rejected) == 1
    assert [r.reason for r in train.rejected] and "missing.png" in train.rejected[0].reason
    assert {train.items[i].answers[0] for i in range(5)} == {"red", "blue", "green"}
    assert all(item.split == "shapes_test" for item in held_out.items)


def test_an_unknown_environment_lists_kinds_and_datasets(tmp_path):
    settings = dataclasses.replace(TRAINING_DEFAULTS, env="shapes")
    other = DatasetSettings(name="charts", kind="jsonl", split="test", limit=0, path=str(tmp_path / "c.jsonl"))
    with pytest.raises(ValueError, match=r"'shapes' is neither an environment kind \(.*easy_vqa.*\) nor a "
                                         r"configured dataset \(charts\)"):
        training_environments(settings, 0, [other])


def test_a_tiny_run_trains_on_a_user_jsonl_dataset(tiny_model_dir, tmp_path):
    dataset = shapes_dataset(tmp_path, "shapes", ["red", "blue", "green", "red"])  # + 1 rejected line
    settings = dataclasses.replace(TRAINING_DEFAULTS, env="shapes", eval_size=10)
    train, held_out = training_environments(settings, 0, [dataset])
    run = dataclasses.replace(settings, group_size=2, kl_coef=0.0, warmup_steps=1, warmup_batch_size=4, steps=1,
                              prompts_per_step=2, control=False, swap_check_type="", eval_interval=10)
    result = run_training(str(tiny_model_dir), tmp_path / "run", run, train, held_out, range(len(held_out)),
                          device="cpu", resume=False)
    assert len(train) == 4 and len(held_out) == 4
    assert [s.phase for s in result.steps] == ["warmup", "grpo"]
    assert [(e.phase, e.report.overall.n) for e in result.evals] == [
        ("no_image_prior", 4), ("base", 4), ("warmup", 4), ("final", 4)]


def test_a_registry_kind_wins_over_a_dataset_of_the_same_name(tmp_path):
    """The shipped config names its benchmark datasets after their kinds ([datasets.easy_vqa] is 48 test
    questions): `env = "easy_vqa"` must still train on the registry's train split."""
    same_name = shapes_dataset(tmp_path, "easy_vqa", ["red"])
    settings = dataclasses.replace(TRAINING_DEFAULTS, env="easy_vqa", train_limit=8, eval_size=4)
    train, held_out = training_environments(settings, 0, [same_name])
    assert {item.split for item in train.items} == {"train"} and len(train) == 8
    assert {item.split for item in held_out.items} == {"test"} and len(held_out) == 4
