"""On a trained checkpoint, two tries are right more often than one: a short supervised warm-up on
easy-VQA, then 192 two-try episodes sampled at temperature 1.0 (the rollout setting): some wrong first
answers are revised to the right one, so the accuracy within two tries exceeds the first-try accuracy (about 1
in 10 wrong first answers is revised; the test asks for at least 6 revisions of the ~140 wrong ones)."""

from __future__ import annotations

import torch

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.two_tries import easy_vqa_two_tries_env
from aerorl_ops.eval_runner.episodes import Sampling
from aerorl_ops.models.loading import ModelSource, load_vlm
from aerorl_ops.rl.run.phases import run_training
from aerorl_ops.rl.step.multi_turn import two_try_report


def test_two_tries_beat_one_on_a_warmed_up_checkpoint(tiny_model_dir, tmp_path):
    torch.set_num_threads(1)
    train = easy_vqa_two_tries_env("train", limit=256, seed=0)
    held_out = easy_vqa_two_tries_env("test", limit=192, seed=0)
    settings = TrainingSettings(warmup_steps=30, steps=0, eval_interval=1000, checkpoint_interval=1000, control=False,
                                swap_check_type="", sampled_eval_size=0, seed=0, eval_size=8)
    result = run_training(str(tiny_model_dir), tmp_path / "run", settings, train.env, held_out.env, list(range(8)),
                          device="cpu")
    trained = load_vlm(ModelSource(str(result.final_checkpoint)), torch.device("cpu"))
    torch.manual_seed(0)
    report = two_try_report(trained, held_out, list(range(192)), 4, Sampling(temperature=1.0))
    wrong_first = round((1 - report.first_try) * 192)
    revised = round(report.within_two_tries * 192) - round(report.first_try * 192)
    assert report.n == 192 and 0.1 < report.first_try < 0.9  # it learned something, not everything
    assert revised == round(report.revised * wrong_first) and revised >= 6
    assert report.within_two_tries > report.first_try
