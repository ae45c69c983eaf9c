"""What a person sees of a training run while it trains: log lines, a progress bar, TensorBoard (and
wandb) scalars, and Pipes messages from a torchrun rank 0. The recorder has stored each row first."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dagster_duckdb import DuckDBResource
from tqdm import tqdm

from aerorl_ops.eval_runner.held_out import EvalResult
from aerorl_ops.reporting.tensorboard import TensorBoardLogger, tensorboard_dir
from aerorl_ops.rl.recorded_run import Log, RunObserver
from aerorl_ops.rl.stats import StepStats
from aerorl_ops.rl.training_run import SampledEval

Report = Callable[[str, dict[str, Any]], None]
"""Called with ("step", a StepStats record) or ("eval", an evaluation's summary) as they happen."""


def progress_postfix(stats: StepStats) -> dict[str, str]:
    """What the progress bar shows after a step: phase, loss, and for RL reward, accuracy and KL."""
    shown = {"phase": stats.phase, "loss": f"{stats.loss:.3f}"}
    for name in ("reward_mean", "accuracy", "kl"):
        value = getattr(stats, name)
        if value is not None:
            shown[name.removesuffix("_mean")] = f"{value:.3f}"
    return shown


class Progress:
    """Shows each step and evaluation of run ``run_id``; :meth:`of` opens it for one run."""

    def __init__(self, board: TensorBoardLogger, bar: tqdm, total_steps: int, log: Log,
                 report: Report | None) -> None:
        self.board, self.bar, self.total_steps, self.log, self.report = board, bar, total_steps, log, report
        self.clock = time.perf_counter()
        self.first_step: int | None = None  # of this process (a resumed run starts after its checkpoint)

    @classmethod
    @contextmanager
    def of(cls, config: Any, run_id: str, total_steps: int, duckdb: DuckDBResource, log: Log,
           report: Report | None) -> Iterator[RunObserver]:
        """TensorBoard beside the database, and the bar when ``config.progress_bar``; closed at the end."""
        board = TensorBoardLogger(tensorboard_dir(Path(duckdb.database).parent, run_id),
                                  wandb_project=config.wandb_project or None, wandb_mode=config.wandb_mode,
                                  run_name=run_id, config=config.model_dump())
        bar = tqdm(total=total_steps, desc=f"training {run_id}", unit="step", disable=not config.progress_bar)
        progress = cls(board, bar, total_steps, log, report)
        try:
            yield RunObserver(progress.on_step, progress.on_eval, progress.on_sampled)
        finally:
            bar.close()
            board.close()

    def on_step(self, stats: StepStats) -> None:
        self.board.log_step(stats)
        self.bar.update(stats.step - self.bar.n)
        self.bar.set_postfix(progress_postfix(stats))
        if self.first_step is None:
            self.first_step = stats.step
        rate = (stats.step - self.first_step + 1) / max(time.perf_counter() - self.clock, 1e-9)
        self.log.info(f"step {stats.step}/{self.total_steps} ({stats.phase}) loss {stats.loss:.4f} "
                      f"reward {stats.reward_mean} accuracy {stats.accuracy} kl {stats.kl}; "
                      f"ETA {(self.total_steps - stats.step) / rate:.0f} s")
        if self.report:
            self.report("step", stats.as_record())

    def on_eval(self, evaluation: EvalResult) -> None:
        self.board.log_eval(evaluation)
        overall = evaluation.report.overall
        self.log.info(f"eval at step {evaluation.step} ({evaluation.phase}): accuracy {overall.accuracy:.4f} "
                      f"± {overall.standard_error:.4f} (n={overall.n})")
        if self.report:
            self.report("eval", {"step": evaluation.step, "phase": evaluation.phase, "accuracy": overall.accuracy,
                                 "stderr": overall.standard_error, "n": overall.n})

    def on_sampled(self, sampled: SampledEval) -> None:
        self.board.log_eval(sampled.outcome, step=sampled.step)
        self.log.info(f"sampled eval at step {sampled.step} on {sampled.env}/{sampled.split}: "
                      + ", ".join(f"{name} {value:.4f}" for name, value in sampled.outcome.scalars().items()
                                  if name.count("/") == 2 and name.endswith("/accuracy")))
