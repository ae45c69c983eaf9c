"""TensorBoard event files of a training run (``reports/tensorboard/<run_id>``), and wandb when asked for.

``TensorBoardLogger`` is a callback-style logger a trainer calls as it goes::

    with TensorBoardLogger(tensorboard_dir(reports_dir, run_id)) as logger:
        ... logger.log_step(stats)        # every numeric field of a StepStats-like dataclass, at stats.step
        ... logger.log_eval(result)       # a held-out EvalResult (at result.step), or an
                                          # evaluator EvalOutcome (pass step=...)

Tags: ``train/<field>`` per step; ``held_out/accuracy``, ``held_out/reward_mean`` and
``held_out/accuracy/<question type>`` for greedy held-out evaluations (the no-image prior and the
supervised control under ``held_out_<phase>/...``, so they do not interleave with the policy's
curve); ``eval/<setting>/<metric>`` for sampling-setting evaluations.

With ``wandb_project`` set and the ``wandb`` package installed, the same scalars go to a wandb run,
offline unless ``wandb_mode`` says otherwise; without the package, that part is skipped (logged once).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from torch.utils.tensorboard import SummaryWriter

from aerorl_ops.reporting.artifacts import safe_path_component

logger = logging.getLogger(__name__)
SEPARATE_PHASES = ("no_image_prior", "control")
"""Held-out phases that are not the policy's own curve."""


def tensorboard_dir(reports_dir: Path, run_id: str) -> Path:
    """``<reports_dir>/tensorboard/<run_id>`` (the run id made safe as a folder name)."""
    return Path(reports_dir) / "tensorboard" / safe_path_component(run_id)


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def step_scalars(stats: Any, prefix: str = "train") -> dict[str, float]:
    """Every finite numeric (or bool) field of a dataclass but ``step``, as ``{prefix}/{field}``.

    >>> from dataclasses import make_dataclass
    >>> Stats = make_dataclass("Stats", ["step", "phase", "loss", "kl", "skipped"])
    >>> step_scalars(Stats(3, "grpo", 0.5, None, False))
    {'train/loss': 0.5, 'train/skipped': 0.0}
    """
    if not dataclasses.is_dataclass(stats):
        raise TypeError(f"log_step takes a dataclass of step statistics (StepStats), got {type(stats).__name__}")
    values = {}
    for field in dataclasses.fields(stats):
        value = _number(getattr(stats, field.name))
        if field.name != "step" and value is not None:
            values[f"{prefix}/{field.name}"] = value
    return values


def held_out_scalars(result: Any) -> dict[str, float]:
    """A greedy held-out evaluation (``step``, ``phase``, ``accuracy``, ``reward_mean``, ``report.by_type``; a
    held-out distribution's under ``held_out/<distribution>``; whole episodes' ``mean_turns`` too).

    >>> from types import SimpleNamespace as Fake
    >>> report = Fake(by_type={})
    >>> sorted(held_out_scalars(Fake(phase="rl", accuracy=0.5, reward_mean=0.4, report=report, distribution="big",
    ...                              episodes=Fake(mean_turns=6.0))))
    ['held_out/big/accuracy', 'held_out/big/mean_turns', 'held_out/big/reward_mean']
    """
    prefix = "held_out" if result.phase not in SEPARATE_PHASES else f"held_out_{result.phase}"
    prefix += f"/{result.distribution}" if getattr(result, "distribution", None) else ""
    values = {f"{prefix}/accuracy": _number(result.accuracy), f"{prefix}/reward_mean": _number(result.reward_mean)}
    for question_type, accuracy in result.report.by_type.items():
        values[f"{prefix}/accuracy/{question_type}"] = _number(accuracy.accuracy)
    if getattr(result, "episodes", None) is not None:
        values[f"{prefix}/mean_turns"] = _number(result.episodes.mean_turns)
    return {tag: value for tag, value in values.items() if value is not None}


class TensorBoardLogger:
    """Scalars of one training run to TensorBoard event files under ``log_dir`` (and wandb, see the module)."""

    def __init__(self, log_dir: Path, *, wandb_project: str | None = None, wandb_mode: str = "offline",
                 run_name: str | None = None, config: Mapping[str, object] | None = None) -> None:
        self.log_dir = Path(log_dir)
        self.writer = SummaryWriter(log_dir=str(self.log_dir))
        self.wandb_run = (_wandb_run(wandb_project, wandb_mode, run_name, config, self.log_dir) if wandb_project
                          else None)

    def log_scalars(self, scalars: Mapping[str, float], step: int) -> None:
        for tag, value in scalars.items():
            self.writer.add_scalar(tag, value, global_step=step)
        if self.wandb_run is not None:
            self.wandb_run.log(dict(scalars), step=step)

    def log_step(self, stats: Any) -> None:
        """One training step's statistics (``StepStats``), at ``stats.step``."""
        self.log_scalars(step_scalars(stats), stats.step)

    def log_eval(self, result: Any, step: int | None = None) -> None:
        """An evaluation: a held-out ``EvalResult`` (at its own step unless ``step`` is given), or an
        ``EvalOutcome`` of the evaluator (``step`` required)."""
        if hasattr(result, "scalars"):
            if step is None:
                raise ValueError("log_eval: an EvalOutcome carries no step; pass step=")
            self.log_scalars(result.scalars(), step)
        else:
            self.log_scalars(held_out_scalars(result), result.step if step is None else step)

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
        if self.wandb_run is not None:
            self.wandb_run.finish()
            self.wandb_run = None

    def __enter__(self) -> TensorBoardLogger:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


def _wandb_run(project: str, mode: str, name: str | None, config: Mapping[str, object] | None, log_dir: Path):
    try:
        import wandb
    except ImportError:
        logger.info("wandb_project=%r but the wandb package is not installed; logging to TensorBoard only", project)
        return None
    return wandb.init(project=project, mode=mode, name=name, config=dict(config or {}), dir=str(log_dir))
