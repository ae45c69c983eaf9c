"""Held-out evaluations of a mixture (``envs.mixture``) report accuracy per source dataset (``EvalResult.by_source``,
``training_eval_sources`` rows); an evaluation of one dataset reports none. The yes-sayer answers "yes" to
every prompt (tests/conftest.py), so each source's accuracy is its share of "yes" answers."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import duckdb
import pytest
import torch
from PIL import Image

from aerorl_ops.envs.mixture import mixture_env
from aerorl_ops.envs.registry import make_env
from aerorl_ops.eval_runner.held_out import evaluate_policy, prior_evaluation
from aerorl_ops.rl.record.recorder import RunRecorder

SHAPES = ["yes", "no", "yes", "yes"]  # "Is shape n red?": the yes-sayer gets 3 of 4
TEXTS = ["yes", "no", "no"]  # "Is n even?": 1 of 3


def jsonl(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.fixture
def mixture(tmp_path):
    torch.set_num_threads(1)
    Image.new("RGB", (2, 2), (255, 0, 0)).save(tmp_path / "red.png")
    shapes = jsonl(tmp_path / "shapes.jsonl", [{"id": f"s{n}", "question": f"Is shape {n} red?", "answer": answer,
                                                "image": "red.png"} for n, answer in enumerate(SHAPES)])
    texts = jsonl(tmp_path / "texts.jsonl", [{"id": f"t{n}", "question": f"Is {n} even?", "answer": answer}
                                             for n, answer in enumerate(TEXTS)])
    return mixture_env({"shapes": lambda limit, seed: make_env("jsonl", path=str(shapes), limit=limit, seed=seed),
                        "texts": lambda limit, seed: make_env("jsonl", path=str(texts), limit=limit, seed=seed,
                                                              allow_no_image=True)},
                       weights=(1, 1), limit=7, seed=0, name="mix")  # 3.5 + 3.5: 4 shapes (the earlier), 3 texts


def test_a_held_out_evaluation_of_a_mixture_reports_each_source(yes_vlm, mixture, tmp_path):
    result = evaluate_policy(yes_vlm, mixture, range(7), max_new_tokens=3, step=5, phase="rl")
    assert (result.report.overall.correct, result.n) == (4, 7)
    assert {source: (value.correct, value.n) for source, value in result.by_source.items()} == {
        "shapes": (3, 4), "texts": (1, 3)}
    assert list(result.by_source) == ["shapes", "texts"]
    prior = prior_evaluation(mixture, mixture, [0, 1, 2])  # every question seen once in training: all right
    assert {source: (value.correct, value.n) for source, value in prior.by_source.items()} == {
        "shapes": (sum(item.dataset == "shapes" for item in mixture.items[:3]),) * 2,
        "texts": (sum(item.dataset == "texts" for item in mixture.items[:3]),) * 2}
    recorder = RunRecorder(partial(duckdb.connect, str(tmp_path / "r.duckdb")), "run-1")
    recorder.evaluation(result)
    with duckdb.connect(str(tmp_path / "r.duckdb")) as conn:
        rows = conn.execute("SELECT run_id, step, phase, source, accuracy, n FROM training_eval_sources "
                            "ORDER BY source").fetchall()
    assert rows == [("run-1", 5, "rl", "shapes", 0.75, 4), ("run-1", 5, "rl", "texts", pytest.approx(1 / 3, abs=1e-12),
                                                            3)]


def test_a_source_without_an_item_in_the_sample_is_listed_with_no_accuracy(yes_vlm, mixture, tmp_path):
    shapes_only = [index for index, item in enumerate(mixture.items) if item.dataset == "shapes"]
    result = evaluate_policy(yes_vlm, mixture, shapes_only, max_new_tokens=3, step=1, phase="base")
    assert {source: (value.correct, value.n) for source, value in result.by_source.items()} == {
        "shapes": (3, 4), "texts": (0, 0)}
    recorder = RunRecorder(partial(duckdb.connect, str(tmp_path / "r.duckdb")), "run-1")
    recorder.evaluation(result)
    with duckdb.connect(str(tmp_path / "r.duckdb")) as conn:
        assert conn.execute("SELECT source, accuracy, n FROM training_eval_sources ORDER BY source").fetchall() == [
            ("shapes", 0.75, 4), ("texts", None, 0)]


def test_an_evaluation_of_one_dataset_reports_no_source(yes_vlm, mixture, tmp_path):
    part = mixture.parts["shapes"]
    result = evaluate_policy(yes_vlm, part, range(4), max_new_tokens=3, step=1, phase="base")
    assert (result.report.overall.correct, result.by_source) == (3, {})
    recorder = RunRecorder(partial(duckdb.connect, str(tmp_path / "r.duckdb")), "run-1")
    recorder.evaluation(result)
    with duckdb.connect(str(tmp_path / "r.duckdb")) as conn:
        assert conn.execute("SELECT count(*) FROM training_eval_sources").fetchone() == (0,)
        assert conn.execute("SELECT accuracy, n FROM training_evals").fetchall() == [(0.75, 4)]
