"""A ``TrainingRun`` reports through one interface (``rl.record.reporters.RunReporter``): where it resumes, then
each step and evaluation in the order they happen; only the main rank reports."""

from __future__ import annotations

import logging

import pytest
import torch

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.registry import make_env
from aerorl_ops.rl.record.reporters import NULL_REPORTER, NullReporter, ProgressReporter, Reporters
from aerorl_ops.rl.run.phases import TrainingRun
from aerorl_ops.rl.runtime.distributed import DataParallel

SETTINGS = TrainingSettings(group_size=2, max_new_tokens=4, kl_coef=0.0, seed=0, warmup_steps=1,
                            warmup_batch_size=4, steps=1, prompts_per_step=2, eval_interval=10,
                            checkpoint_interval=100, control=False, swap_check_type="", sampled_eval_size=0)
"""One warm-up step, one RL step: evaluations of the prior and the base at 0, the warm-up's at 1, the final at 2."""


class Events(NullReporter):
    """Every event, in order, as ``(kind, what)``."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def on_resume(self, point) -> None:
        self.events.append(("resume", point.step))

    def on_step(self, stats) -> None:
        self.events.append(("step", (stats.step, stats.phase)))

    def on_eval(self, evaluation) -> None:
        self.events.append(("eval", (evaluation.phase, evaluation.step)))

    def on_sampled(self, sampled) -> None:
        self.events.append(("sampled", (sampled.phase, sampled.step)))

    def close(self) -> None:
        self.events.append(("close", None))


class NotMain(DataParallel):
    """One process that is not the main rank: it owns the whole batch, and its collectives are no-ops."""

    @property
    def is_main(self) -> bool:
        return False


@pytest.fixture(scope="module")
def envs():
    torch.set_num_threads(1)
    return make_env("easy_vqa", split="train", limit=16, seed=1), make_env("easy_vqa", split="test", limit=4, seed=0)


def run(model_dir, folder, envs, reporter):
    train_env, held_out = envs
    return TrainingRun(str(model_dir), folder, SETTINGS.resolve(), train_env, held_out, range(4), device="cpu",
                       reporter=reporter).run()


def test_a_reporter_hears_the_resume_then_each_step_and_evaluation_in_order(tiny_model_dir, envs, tmp_path):
    events = Events()
    result = run(tiny_model_dir, tmp_path / "run", envs, events)
    assert events.events == [
        ("resume", 0), ("eval", ("no_image_prior", 0)), ("eval", ("base", 0)), ("step", (1, "warmup")),
        ("eval", ("warmup", 1)), ("step", (2, "grpo")), ("eval", ("final", 2))]  # the run does not close it
    assert [(e.phase, e.step) for e in result.evals] == [event for kind, event in events.events if kind == "eval"]

    again = Events()  # the same run again: it resumes from its final checkpoint, and trains no more
    run(tiny_model_dir, tmp_path / "run", envs, again)
    assert again.events[0] == ("resume", 2) and ("step", (2, "grpo")) not in again.events


def test_a_rank_other_than_the_main_one_trains_and_reports_nothing(tiny_model_dir, envs, tmp_path):
    events = Events()
    training = TrainingRun(str(tiny_model_dir), tmp_path / "run", SETTINGS.resolve(), *envs, range(4), device="cpu",
                           dp=NotMain(), reporter=events)
    assert training.reporter is NULL_REPORTER
    result = training.run()
    assert events.events == [] and [s.step for s in result.steps] == [1, 2]  # it trained both steps
    assert result.evals == [] and not (tmp_path / "run").exists()  # no evaluation, no checkpoint


def test_reporters_are_told_in_the_order_given_and_closed(caplog):
    first, second = Events(), Events()
    both = Reporters([first, second])
    both.on_resume(type("Point", (), {"step": 3})())
    both.close()
    assert first.events == second.events == [("resume", 3), ("close", None)]
    progress = ProgressReporter(logging.getLogger("progress-test"), "r", total_steps=4, bar=False)
    with caplog.at_level(logging.INFO, logger="progress-test"):
        progress.on_step(type("Stats", (), dict(step=1, phase="warmup", loss=0.5, reward_mean=None,
                                                 accuracy=None, kl=None))())
    progress.close()
    assert caplog.records[0].getMessage().startswith("step 1/4 (warmup) loss 0.5000 reward None accuracy None kl None")


def test_the_terminal_says_where_a_resumed_run_resumes(capsys, tmp_path):
    from aerorl_ops.rl.runtime.checkpoint_files import CheckpointState, ResumePoint

    checkpoint = tmp_path / "r" / "step-6"
    point = ResumePoint(checkpoint, CheckpointState(step=6, reference_source="base", optimizer={}))
    shown = ProgressReporter(logging.getLogger("progress-test"), "r", total_steps=8, bar=True)
    shown.on_resume(point)
    shown.on_resume(ResumePoint())  # a run from the start says nothing
    shown.close()
    hidden = ProgressReporter(logging.getLogger("progress-test"), "r", total_steps=8, bar=False)
    hidden.on_resume(point)  # no terminal (a step in the UI): its log has the line (RecorderReporter)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("resuming")]
    assert lines == [f"resuming run r from step-6 (checkpoint {checkpoint})"]
