"""The TensorBoard logger writes event files that hold the logged scalars at their steps."""

from __future__ import annotations

import dataclasses

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from aerorl_ops.eval_metrics.accuracy import accuracy_report
from aerorl_ops.eval_metrics.sampling import SamplingSetting
from aerorl_ops.eval_runner.held_out import EvalResult
from aerorl_ops.eval_runner.runner import EvalOutcome, SampleRecord
from aerorl_ops.eval_runner.summaries import setting_metrics
from aerorl_ops.reporting.tensorboard import TensorBoardLogger, step_scalars, tensorboard_dir
from aerorl_ops.rl.step.stats import StepStats


def step_stats(step: int, **values) -> StepStats:
    """A StepStats with every required field set (text fields "grpo", flags False, numbers ``step / 10``)."""
    kwargs = {}
    for field in dataclasses.fields(StepStats):
        if field.default is not dataclasses.MISSING:
            continue
        kwargs[field.name] = {"step": step, "phase": "grpo", "skipped": False}.get(field.name, step / 10)
    return StepStats(**{**kwargs, **values})


def scalars(log_dir) -> dict[str, list[tuple[int, float]]]:
    events = EventAccumulator(str(log_dir))
    events.Reload()
    return {tag: [(e.step, pytest.approx(e.value)) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_steps_and_both_kinds_of_evaluation_read_back_from_the_event_file(tmp_path):
    log_dir = tensorboard_dir(tmp_path, "rl-grpo/s0")
    assert log_dir == tmp_path / "tensorboard" / log_dir.name and "/" not in log_dir.name
    setting = SamplingSetting("low_temp_pass1", temperature=0.01, top_p=0.001)
    samples = [SampleRecord(setting.name, q, f"q{q}", "shape", 0, "wait, red", q < 3, float(q < 3), 2, False, True)
               for q in range(4)]
    outcome = EvalOutcome((0, 1, 2, 3), (setting,), 8, 0, tuple(samples), tuple(setting_metrics(setting, samples, 8)))
    held_out = EvalResult(step=2, phase="rl", reward_mean=0.5, component_means={},
                          report=accuracy_report([("shape", True), ("colour", False)]))
    prior = EvalResult(step=0, phase="no_image_prior", reward_mean=None, component_means={},
                       report=accuracy_report([("shape", True), ("shape", False), ("colour", False)]))
    with TensorBoardLogger(log_dir) as logger:
        logger.log_step(step_stats(1, kl=None))
        logger.log_step(step_stats(2, kl=0.25))
        logger.log_eval(prior)
        logger.log_eval(held_out)
        logger.log_eval(outcome, step=2)
        with pytest.raises(ValueError, match="pass step"):
            logger.log_eval(outcome)
    assert list(log_dir.glob("events.out.tfevents.*"))
    logged = scalars(log_dir)
    assert logged["train/loss"] == [(1, 0.1), (2, 0.2)]
    assert logged["train/kl"] == [(2, 0.25)]  # None is not logged
    assert logged["train/skipped"] == [(1, 0.0), (2, 0.0)]
    assert "train/step" not in logged and "train/phase" not in logged
    assert logged["held_out/accuracy"] == [(2, 0.5)]
    assert logged["held_out/accuracy/colour"] == [(2, 0.0)]
    assert logged["held_out_no_image_prior/accuracy"] == [(0, 1 / 3)]
    assert "held_out_no_image_prior/reward_mean" not in logged
    assert logged["eval/low_temp_pass1/accuracy"] == [(2, 0.75)]
    assert logged["eval/low_temp_pass1/reflection_ratio_in_correct"] == [(2, 1.0)]
    assert logged["eval/low_temp_pass1/shape/accuracy"] == [(2, 0.75)]
    assert logged["eval/low_temp_pass1/mean_length"] == [(2, 2.0)]


def test_step_scalars_needs_a_dataclass():
    with pytest.raises(TypeError, match="dataclass"):
        step_scalars({"step": 1, "loss": 0.5})


def test_wandb_is_skipped_when_it_is_not_installed(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_wandb(name, *args, **kwargs):
        if name == "wandb":
            raise ImportError("no wandb here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_wandb)
    with TensorBoardLogger(tmp_path / "tb", wandb_project="aerorl") as logger:
        assert logger.wandb_run is None
        logger.log_step(step_stats(1))
    assert scalars(tmp_path / "tb")["train/loss"] == [(1, 0.1)]
