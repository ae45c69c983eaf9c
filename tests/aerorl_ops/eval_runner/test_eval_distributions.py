"""``aerorl eval`` on a multi-turn dataset and on a held-out distribution (issue 41): both models play whole
episodes, and the comparison's rows carry the distribution's name; an eval id without ``held_out`` is unchanged."""

from __future__ import annotations

import pytest
import torch

from aerorl_ops.config.datasets import DEFAULT_DATASETS, DatasetSettings
from aerorl_ops.config.evaluation import EvalSettings
from aerorl_ops.envs.registry import make_env
from aerorl_ops.eval_runner.model_vs_baseline import compare_models, dataset_record, eval_id_of
from aerorl_ops.models.entry import ModelEntry
from aerorl_ops.rl.step.multi_turn import sample_episodes

SETTINGS = EvalSettings(model="yes", baseline="tiny", n=6, samples=2, k=2, greedy=True, max_new_tokens=3,
                        batch_size=4, resamples=50)


def test_both_models_play_whole_episodes_and_the_rows_name_the_distribution(yes_vlm, tiny_vlm):
    torch.set_num_threads(1)
    env = make_env("easy_vqa_two_tries", split="test", limit=6, seed=2)
    dataset = DatasetSettings("two_tries_big", "easy_vqa_two_tries", "test", 6, seed=2)
    models = {"yes": yes_vlm, "tiny": tiny_vlm}
    result = compare_models(lambda entry: models[entry.key], ModelEntry("yes", "yes"), ModelEntry("tiny", "tiny"),
                            env, dataset, SETTINGS, "e/big", play=sample_episodes, distribution="big")
    yes = [item.answers[0] == "yes" for item in env.items]
    greedy = [s for s in result.model.outcome.samples if s.setting == "greedy_pass1"]
    assert [s.turns for s in greedy] == [1 if y else 2 for y in yes] and [s.correct for s in greedy] == yes
    samples, metrics, comparisons = (write.rows.to_pylist() for write in result.writes()[1:4])
    assert {row["distribution"] for row in samples + metrics + comparisons} == {"big"}
    overall = [row for row in metrics if row["role"] == "model" and row["setting"] == "greedy_pass1"
               and row["question_type"] == "all"]
    assert overall[0]["mean_turns"] == pytest.approx(sum(1 if y else 2 for y in yes) / 6)


def test_a_dataset_without_held_out_keeps_its_eval_id():
    easy_vqa = DEFAULT_DATASETS[2]
    assert "held_out" not in dataset_record(easy_vqa)
    named = DatasetSettings(**{**easy_vqa.__dict__, "held_out": ("other",)})
    assert dataset_record(named)["held_out"] == ["other"]
    assert eval_id_of(EvalSettings(), named) != eval_id_of(EvalSettings(), easy_vqa)
