"""The second embedded model: the embedded default after a short supervised run on easy-VQA.

A three-step recipe checks the build itself (deterministic to the byte, cached, trained once when two
builders race); the shipped recipe (built once per session, ~50 s) must read colour from the image:
on held-out questions it was not scored on at build time, its colour accuracy beats the no-image
prior by 20 points, and answering with another question's image changes most colour answers.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from aerorl_ops.config.benchmark import ConfigError, load_benchmark_config
from aerorl_ops.envs.easy_vqa import easy_vqa_env
from aerorl_ops.eval_runner.held_out import evaluate_policy, image_swap_check, prior_evaluation
from aerorl_ops.models.embedded_easy_vqa import HELD_OUT_QUESTIONS, EasyVQAWarmStart, held_out_score
from aerorl_ops.models.entry import EMBEDDED_DEFAULT, EMBEDDED_EASY_VQA, ModelEntry
from aerorl_ops.models.loading import ModelUnavailableError, load_vlm
from aerorl_ops.models.sources import model_source
from aerorl_ops.rl.run import embedded_builds as embedded_easy_vqa
from aerorl_ops.rl.run.embedded_builds import EMBEDDED_BUILDERS, build_tiny_qwen2vl_easy_vqa

THREE_STEPS = EasyVQAWarmStart(steps=3, batch_size=4, lr_warmup_steps=1, curriculum="2: colour @ 0.75")


def files_of(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


@pytest.mark.filterwarnings("ignore:embedded model 'tiny-qwen2-vl-easy-vqa' reads colour")
def test_the_build_is_deterministic_cached_and_not_the_base(tmp_path, monkeypatch, capsys):
    with pytest.warns(UserWarning, match=r"reads colour [-+]\d+\.\d% against the no-image prior on 600 held-out "
                                         r"questions \(expected \+20\.0% or more\)"):  # three steps teach no colour
        first = build_tiny_qwen2vl_easy_vqa(tmp_path / "a" / EMBEDDED_EASY_VQA, THREE_STEPS)
    said = capsys.readouterr().err  # a one-time build says what it does, with a step bar
    assert f"building {EMBEDDED_EASY_VQA} (one time, about 45 s on 2 idle cores) into {first}\n" in said
    assert f"building {EMBEDDED_EASY_VQA}: 100%" in said and "3/3" in said
    assert f"{EMBEDDED_EASY_VQA}: scoring 600 held-out questions" in said
    assert f"built {EMBEDDED_EASY_VQA}: held-out accuracy " in said
    second = build_tiny_qwen2vl_easy_vqa(tmp_path / "b" / EMBEDDED_EASY_VQA, THREE_STEPS)
    assert files_of(first) == files_of(second)  # weights, processor, marker and held-out score, byte for byte
    assert {"model.safetensors", "config.json", "tokenizer.json", "aerorl_embedded.json",
            "held_out.json"} <= set(files_of(first))
    base = tmp_path / "a" / EMBEDDED_DEFAULT  # the base was built beside it, and training moved the weights
    assert (base / "model.safetensors").read_bytes() != (first / "model.safetensors").read_bytes()
    marker = json.loads((first / "aerorl_embedded.json").read_text())
    assert (marker["steps"], marker["batch_size"], marker["curriculum"]) == (3, 4, "2: colour @ 0.75")
    score = held_out_score(first)
    assert score.n == HELD_OUT_QUESTIONS and set(score.by_type) == {"colour", "shape", "yes_no"}

    def no_training(*args):
        raise AssertionError("a cached build trained again")
    monkeypatch.setattr(embedded_easy_vqa, "_train", no_training)
    capsys.readouterr()
    assert build_tiny_qwen2vl_easy_vqa(first, THREE_STEPS) == first
    assert capsys.readouterr().err == ""  # a cached build says nothing
    with pytest.raises(AssertionError, match="trained again"):  # another recipe is another build
        build_tiny_qwen2vl_easy_vqa(first, replace(THREE_STEPS, steps=4))


@pytest.mark.filterwarnings("ignore:embedded model 'tiny-qwen2-vl-easy-vqa' reads colour")
def test_builders_that_race_train_once(tmp_path, monkeypatch, capsys):
    trained = []
    train = embedded_easy_vqa._train

    def counting(*args):
        trained.append(threading.current_thread().name)
        return train(*args)
    monkeypatch.setattr(embedded_easy_vqa, "_train", counting)
    folder = tmp_path / EMBEDDED_EASY_VQA
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(build_tiny_qwen2vl_easy_vqa(folder, THREE_STEPS)))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [folder, folder] and len(trained) == 1
    said = capsys.readouterr().err  # the builder that waited said so, and what it found
    assert f"waiting for another process to finish building {EMBEDDED_EASY_VQA} (lock " in said
    assert f"{EMBEDDED_EASY_VQA}: built by the other process, {folder}\n" in said
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [EMBEDDED_DEFAULT,
                                                                                        EMBEDDED_EASY_VQA]


def test_a_caller_below_the_trainer_names_the_embedded_model_it_cannot_build(tmp_path):
    entry = ModelEntry("nightly-trained", f"embedded:{EMBEDDED_EASY_VQA}")
    with pytest.raises(ModelUnavailableError) as raised:
        model_source(entry, tmp_path)
    assert str(raised.value) == (f"model 'nightly-trained': embedded model '{EMBEDDED_EASY_VQA}' cannot be built "
                                 f"here (this caller builds ['{EMBEDDED_DEFAULT}'])")
    assert not list(tmp_path.iterdir())  # nothing was built


def test_the_config_knows_both_embedded_models(tmp_path):
    path = tmp_path / "bench.toml"
    path.write_text(f'[benchmark]\nbatch_sizes = [1]\n[models.trained]\nsource = "embedded:{EMBEDDED_EASY_VQA}"\n')
    assert load_benchmark_config(path).model("trained").embedded_name == EMBEDDED_EASY_VQA
    path.write_text('[benchmark]\nbatch_sizes = [1]\n[models.trained]\nsource = "embedded:tiny-qwen2-vl-ocr"\n')
    with pytest.raises(ConfigError, match=r"setting 'models\.trained\.source' names no embedded model; known: "
                                          r"\('tiny-qwen2-vl', 'tiny-qwen2-vl-easy-vqa'\)"):
        load_benchmark_config(path)


def test_the_shipped_model_reads_colour_from_the_image(easy_vqa_model_dir, models_dir):
    build_score = held_out_score(easy_vqa_model_dir)
    assert build_score.colour_gain >= 0.20
    source = model_source(ModelEntry(EMBEDDED_EASY_VQA, f"embedded:{EMBEDDED_EASY_VQA}"), models_dir,
                          builders=EMBEDDED_BUILDERS)
    assert Path(source.location) == easy_vqa_model_dir  # what the benchmark loads is the cached build
    loaded = load_vlm(source, torch.device("cpu"))
    held_out = easy_vqa_env("test", limit=1500, seed=1)  # another sample than the build scored
    colour = [i for i in range(len(held_out)) if held_out.question_type(i) == "colour"]
    model = evaluate_policy(loaded, held_out, colour, 4, 0, "final").report.by_type["colour"]
    prior = prior_evaluation(easy_vqa_env("train"), held_out, colour).report.by_type["colour"]
    assert model.n == prior.n >= 150
    assert model.accuracy >= prior.accuracy + 0.20, (model, prior)
    swap = image_swap_check(loaded, held_out, colour, "colour", 4)
    assert swap.questions == len(colour) and swap.changed >= 0.5  # another image, another colour
