"""A run resolves its settings once, where they come in (``train_and_record``): the library below takes the
``Recipe`` and refuses settings that were not resolved; the run's id and recorded config are the Recipe's."""

from __future__ import annotations

import dataclasses
import json
from functools import partial

import duckdb
import pytest
import torch

from aerorl_ops.config.benchmark import load_benchmark_config
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.registry import make_env
from aerorl_ops.rl.run.phases import TrainingRun
from aerorl_ops.rl.run.run_id import training_run_id
from aerorl_ops.rl.run.train_and_record import ModelPlace, ReportPlace, RunOptions, train_and_record
from aerorl_ops.rl.step.trainer import RLTrainer

CONFIG = '[benchmark]\nbatch_sizes = [1]\n\n[models.tiny-qwen2-vl]\nsource = "embedded:tiny-qwen2-vl"\n'
SETTINGS = TrainingSettings(algorithm="dapo", env="easy_vqa", train_limit=8, warmup_steps=1, warmup_batch_size=2,
                            steps=1, prompts_per_step=1, group_size=2, max_new_tokens=3, max_sampling_rounds=1,
                            seed=5, eval_size=2, eval_interval=10, sampled_eval_size=0, control=False,
                            swap_check_type="", checkpoint_interval=100)
"""dapo: no KL (no reference loads), dynamic sampling and the overlong buffer taken from the algorithm."""


class _Quiet:
    def info(self, msg):
        pass

    def warning(self, msg):
        pass


def test_the_library_takes_a_recipe_not_settings_left_unresolved():
    with pytest.raises(TypeError, match=r"^RLTrainer takes a Recipe, the settings resolved once for their "
                                        r"algorithm, got TrainingSettings: pass settings.resolve\(\)$"):
        RLTrainer(SETTINGS)
    env = make_env("easy_vqa", split="train", limit=2, seed=1)
    with pytest.raises(TypeError, match=r"^TrainingRun takes a Recipe"):
        TrainingRun("unused", "unused", SETTINGS, env, env, [0])
    assert RLTrainer(SETTINGS.resolve()).loss.clip_high == 0.28  # dapo's, from the Recipe


@pytest.mark.slow
def test_a_run_resolves_its_settings_once_and_records_its_recipe(models_dir, tiny_model_dir, tmp_path, monkeypatch):
    torch.set_num_threads(1)
    config = tmp_path / "bench.toml"
    config.write_text(CONFIG)
    calls = []
    resolve = TrainingSettings.resolve

    def counted(settings):
        calls.append(settings)
        return resolve(settings)

    monkeypatch.setattr(TrainingSettings, "resolve", counted)
    database = str(tmp_path / "report.duckdb")
    run = train_and_record(load_benchmark_config(config), SETTINGS, RunOptions("", False, False, "", "offline"),
                           ModelPlace(models_dir, True, "cpu", 1, 1.0),
                           ReportPlace(database, partial(duckdb.connect, database), tmp_path / "checkpoints"),
                           log=_Quiet())
    assert calls == [SETTINGS]  # once, for the whole run: id, trainer, record
    monkeypatch.undo()
    recipe = SETTINGS.resolve()
    assert run is not None and run.stored.recorded_steps == 2
    assert run.run_id == training_run_id(SETTINGS, recipe)
    with duckdb.connect(database) as conn:
        (recorded,) = conn.execute("SELECT config FROM training_runs").fetchone()
    assert recorded == json.dumps(dataclasses.asdict(recipe))
    assert (recipe.overlong_buffer, recipe.dynamic_sampling, recipe.kl_coef) == (1, True, 0.0)
