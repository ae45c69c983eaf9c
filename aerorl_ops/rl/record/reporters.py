"""How a training run (``rl.run.phases.TrainingRun``) talks to the outside: one small interface,
:class:`RunReporter`, told where the run resumes, then of every step, held-out evaluation and sampled
evaluation as it ends, and closed by whoever opened it.

The library's reporters: :class:`ProgressReporter` (log lines and a tqdm bar),
:class:`TensorBoardReporter` (TensorBoard, and wandb when configured), the DuckDB recorder
(``rl.run.train_and_record.RecorderReporter``) and :class:`CallbackReporter` (plain callables). A caller adds
its own (Dagster Pipes messages) and joins them with :class:`Reporters`, in the order they are told.
Only the main rank reports: every other rank's run holds :data:`NULL_REPORTER`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tqdm import tqdm

from aerorl_ops.eval_runner.held_out import EvalResult
from aerorl_ops.reporting.tensorboard import TensorBoardLogger
from aerorl_ops.reporting.training_plots import save_training_plots
from aerorl_ops.rl.record.result import SampledEval
from aerorl_ops.rl.runtime.checkpoint_files import ResumePoint
from aerorl_ops.rl.step.rollout_samples import RolloutSample
from aerorl_ops.rl.step.stats import StepStats

logger = logging.getLogger(__name__)


class Log(Protocol):
    """Where a run's lines go: a step's ``context.log``, a rank's Pipes logger, a ``logging.Logger``."""

    def info(self, msg: str) -> Any: ...

    def warning(self, msg: str) -> Any: ...


class RunReporter(Protocol):
    """What a run tells the outside, in this order: ``on_resume`` once (before any model loads), then
    ``on_step`` / ``on_eval`` / ``on_sampled`` as each ends (``on_rollouts`` after an RL step's ``on_step``,
with its sampled replies); ``close`` when the run is over."""

    def on_resume(self, point: ResumePoint) -> None: ...

    def on_step(self, stats: StepStats) -> None: ...

    def on_eval(self, evaluation: EvalResult) -> None: ...

    def on_sampled(self, sampled: SampledEval) -> None: ...

    def on_rollouts(self, samples: Sequence[RolloutSample]) -> None: ...

    def close(self) -> None: ...


class NullReporter:
    """A reporter that ignores every event (a reporter interested in some events extends it)."""

    def on_resume(self, point: ResumePoint) -> None:
        pass

    def on_step(self, stats: StepStats) -> None:
        pass

    def on_eval(self, evaluation: EvalResult) -> None:
        pass

    def on_sampled(self, sampled: SampledEval) -> None:
        pass

    def on_rollouts(self, samples: Sequence[RolloutSample]) -> None:
        pass

    def close(self) -> None:
        pass


NULL_REPORTER = NullReporter()
"""What a run that reports nothing (every rank but the main one) holds."""


class Reporters:
    """Several reporters told of each event in the given order, and closed in that order."""

    def __init__(self, reporters: Sequence[RunReporter]) -> None:
        self.reporters = list(reporters)

    def on_resume(self, point: ResumePoint) -> None:
        for reporter in self.reporters:
            reporter.on_resume(point)

    def on_step(self, stats: StepStats) -> None:
        for reporter in self.reporters:
            reporter.on_step(stats)

    def on_eval(self, evaluation: EvalResult) -> None:
        for reporter in self.reporters:
            reporter.on_eval(evaluation)

    def on_sampled(self, sampled: SampledEval) -> None:
        for reporter in self.reporters:
            reporter.on_sampled(sampled)

    def on_rollouts(self, samples: Sequence[RolloutSample]) -> None:
        for reporter in self.reporters:
            reporter.on_rollouts(samples)

    def close(self) -> None:
        for reporter in self.reporters:
            reporter.close()


def warn_torn(point: ResumePoint) -> None:
    """Each torn checkpoint a resumed run skipped, as a warning (logger ``aerorl_ops.rl.record.reporters``)."""
    for torn in point.skipped:
        logger.warning("skipped the torn checkpoint %s: %s", torn.path, torn.reason)


@dataclass(frozen=True)
class CallbackReporter(NullReporter):
    """Plain callables as a reporter (``rl.run.phases.run_training``'s callbacks); without
    ``on_resume`` each torn checkpoint skipped is named in a warning (:func:`warn_torn`)."""

    step: Callable[[StepStats], None] | None = None
    evaluation: Callable[[EvalResult], None] | None = None
    sampled: Callable[[SampledEval], None] | None = None
    resume: Callable[[ResumePoint], None] = warn_torn

    def on_resume(self, point: ResumePoint) -> None:
        self.resume(point)

    def on_step(self, stats: StepStats) -> None:
        if self.step is not None:
            self.step(stats)

    def on_eval(self, evaluation: EvalResult) -> None:
        if self.evaluation is not None:
            self.evaluation(evaluation)

    def on_sampled(self, sampled: SampledEval) -> None:
        if self.sampled is not None:
            self.sampled(sampled)


def progress_postfix(stats: StepStats) -> dict[str, str]:
    """What the progress bar shows after a step: phase, loss, and for RL reward, accuracy and KL."""
    shown = {"phase": stats.phase, "loss": f"{stats.loss:.3f}"}
    for name in ("reward_mean", "accuracy", "kl"):
        value = getattr(stats, name)
        if value is not None:
            shown[name.removesuffix("_mean")] = f"{value:.3f}"
    return shown


class ProgressReporter(NullReporter):
    """A log line per step (with an ETA), evaluation and sampled evaluation of run ``run_id``, and a
    progress bar on the terminal when ``bar``."""

    def __init__(self, log: Log, run_id: str, total_steps: int, bar: bool) -> None:
        self.log, self.run_id, self.total_steps = log, run_id, total_steps
        self.bar = tqdm(total=total_steps, desc=f"training {run_id}", unit="step", disable=not bar)
        self.clock = time.perf_counter()
        self.first_step: int | None = None  # of this process (a resumed run starts after its checkpoint)

    def on_resume(self, point: ResumePoint) -> None:
        """On the terminal (with the bar): where the run resumes, before its bar starts at the next step."""
        if point.checkpoint is not None and not self.bar.disable:
            self.bar.write(f"resuming run {self.run_id} from {point.checkpoint.name} (checkpoint {point.checkpoint})")

    def on_step(self, stats: StepStats) -> None:
        self.bar.update(stats.step - self.bar.n)
        self.bar.set_postfix(progress_postfix(stats))
        if self.first_step is None:
            self.first_step = stats.step
        rate = (stats.step - self.first_step + 1) / max(time.perf_counter() - self.clock, 1e-9)
        self.log.info(f"step {stats.step}/{self.total_steps} ({stats.phase}) loss {stats.loss:.4f} "
                      f"reward {stats.reward_mean} accuracy {stats.accuracy} kl {stats.kl}; "
                      f"ETA {(self.total_steps - stats.step) / rate:.0f} s")

    def on_eval(self, evaluation: EvalResult) -> None:
        overall, episodes = evaluation.report.overall, evaluation.episodes
        on = f" on {evaluation.distribution}" if evaluation.distribution else ""
        what = "success" if episodes else "accuracy"
        turns = (f", return {episodes.mean_return:.3f} ± {episodes.return_stderr:.3f}, turns "
                 f"{episodes.mean_turns:.2f} ± {episodes.turns_stderr:.2f}") if episodes else ""
        self.log.info(f"eval at step {evaluation.step} ({evaluation.phase}){on}: {what} {overall.accuracy:.4f} "
                      f"± {overall.standard_error:.4f} (n={overall.n}){turns}")

    def on_sampled(self, sampled: SampledEval) -> None:
        self.log.info(f"sampled eval at step {sampled.step} on {sampled.env}/{sampled.split}: "
                      + ", ".join(f"{name} {value:.4f}" for name, value in sampled.outcome.scalars().items()
                                  if name.count("/") == 2 and name.endswith("/accuracy")))

    def close(self) -> None:
        self.bar.close()


class TensorBoardReporter(NullReporter):
    """Every step's statistics and every evaluation's scalars to ``board`` (TensorBoard, and wandb)."""

    def __init__(self, board: TensorBoardLogger) -> None:
        self.board = board

    def on_step(self, stats: StepStats) -> None:
        self.board.log_step(stats)

    def on_eval(self, evaluation: EvalResult) -> None:
        self.board.log_eval(evaluation)

    def on_sampled(self, sampled: SampledEval) -> None:
        self.board.log_eval(sampled.outcome, step=sampled.step)

    def close(self) -> None:
        self.board.close()


class FiguresReporter(NullReporter):
    """Run ``run_id``'s figures (``reporting.training_plots``: curves of what is stored for it), saved
    as PNGs in ``folder`` when the run is over; ``connect`` opens the report database its rows are in."""

    def __init__(self, connect: Callable[[], Any], run_id: str, folder: Path) -> None:
        self.connect, self.run_id, self.folder = connect, run_id, folder

    def close(self) -> None:
        with self.connect() as conn:
            save_training_plots(conn, self.run_id, self.folder)
