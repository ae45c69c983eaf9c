"""A ``[datasets.<name>]`` judge grades training replies too: ``train_and_record`` wraps the training
environment, so every reply's reward gains ``judge_weight`` x the judge's grade."""

from __future__ import annotations

from functools import partial

import duckdb
import pytest

from aerorl_ops.config.benchmark import load_benchmark_config
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.rewards.judge import JudgeReply
from aerorl_ops.rl.run import train_and_record as recorded_run
from aerorl_ops.rl.run.train_and_record import ModelPlace, ReportPlace, RunOptions, train_and_record

CONFIG = """
[benchmark]
batch_sizes = [1]

[models.tiny-qwen2-vl]
source = "embedded:tiny-qwen2-vl"

[datasets.plain]
kind = "easy_vqa"
split = "train"
limit = 16

[datasets.judged]
kind = "easy_vqa"
split = "train"
limit = 16
judge = "tiny-qwen2-vl"
judge_weight = 0.5
"""


class FullMarks:
    """A judge that gives every reply 10/10 (``rewards.judge.JudgeModel``)."""

    key = "full-marks"
    identity = "full-marks"

    def __init__(self) -> None:
        self.asked = 0

    def generate(self, prompts, max_new_tokens, max_time_s):
        self.asked += len(prompts)
        return [JudgeReply("10/10", True) for _ in prompts]


@pytest.mark.slow
def test_a_judged_dataset_adds_the_weighted_grade_to_every_training_reward(models_dir, tiny_model_dir, tmp_path,
                                                                            monkeypatch):
    config = tmp_path / "bench.toml"
    config.write_text(CONFIG)
    bench = load_benchmark_config(config)
    judge = FullMarks()
    monkeypatch.setattr(recorded_run, "judge_loader", lambda *args, **kwargs: lambda key: judge)
    database = str(tmp_path / "report.duckdb")
    rewards = {}
    for env in ("plain", "judged"):
        settings = TrainingSettings(env=env, eval_env="plain", group_size=2, prompts_per_step=2, max_new_tokens=3,
                                    kl_coef=0.0, seed=2, warmup_steps=0, steps=1, eval_size=4, control=False,
                                    swap_check_type="", sampled_eval_size=0)
        train_and_record(bench, settings, RunOptions(env, False, False, "", "offline"),
                         ModelPlace(models_dir, True, "cpu", 1, 1.0),
                         ReportPlace(database, partial(duckdb.connect, database), tmp_path / "checkpoints"),
                         log=_Quiet())
        with duckdb.connect(database) as conn:
            rewards[env] = conn.execute("SELECT reward_mean FROM training_steps WHERE run_id = ?", [env]).fetchone()[0]
    assert judge.asked == 4  # one grade per reply: 2 prompts x 2
    assert rewards["judged"] == pytest.approx(rewards["plain"] + 0.5, abs=1e-6)


class _Quiet:
    def info(self, msg):
        pass

    def warning(self, msg):
        pass
