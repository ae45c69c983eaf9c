"""A training run recorded as it happens (``record_training``): what the ``rl_run`` asset and each
torchrun rank 0 do around ``training_run.run_training``.

1. A run whose stored row is finished, for the same number of steps, is not trained again when it is
   resumed: one log line says so, and the stored run is returned as it is.
2. Else the ``training_runs`` row is written (``resume=False``: the run's earlier rows are deleted
   first), then the rows the training and held-out environments rejected (one warning line: the count
   and the first reasons).
3. ``train`` runs with the recorder's callbacks, then the caller's (``RunObserver``): every step and
   evaluation is stored when it ends, before anything else sees it. Where it resumes is logged, with
   each torn checkpoint it skipped as a warning.
4. The row is completed, and the run is returned as stored: figures of steps and evaluations made
   by an earlier, killed process of the same run included.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from aerorl_ops.envs.rejections import rejection_summary
from aerorl_ops.eval_runner.held_out import EvalResult
from aerorl_ops.rl.checkpoint import ResumePoint
from aerorl_ops.rl.run_recorder import Rejections, RunRecorder, StoredRun
from aerorl_ops.rl.stats import StepStats
from aerorl_ops.rl.training_record import TrainingRunRecord
from aerorl_ops.rl.training_run import SampledEval, TrainingResult
from aerorl_ops.telemetry import TelemetrySampler

"""How many rejection reasons the warning line quotes."""


class Log(Protocol):
    """Where a run's lines go: a step's ``context.log``, a rank's Pipes logger, a ``logging.Logger``."""

    def info(self, msg: str) -> Any: ...

    def warning(self, msg: str) -> Any: ...


@dataclass(frozen=True)
class RunObserver:
    """The caller's callbacks (progress, TensorBoard, Pipes messages), called after the recorder's."""

    on_step: Callable[[StepStats], None] | None = None
    on_eval: Callable[[EvalResult], None] | None = None
    on_sampled: Callable[[SampledEval], None] | None = None


def record_training(recorder: RunRecorder, record: TrainingRunRecord, train: Callable[..., TrainingResult],
                    rejections: Sequence[Rejections], log: Log, resume: bool = True,
                    observe: Callable[[], AbstractContextManager[RunObserver]] = lambda: nullcontext(RunObserver()),
                    telemetry: TelemetrySampler | None = None) -> StoredRun:
    """Train and record the run of ``record`` (:meth:`TrainingRunRecord.started`) as the module docstring
    says. ``train`` is ``run_training`` with every argument but its callbacks (``on_step``, ``on_eval``,
    ``on_sampled``, ``on_resume``); ``observe`` opens the caller's observer, only when the run trains;
    ``telemetry`` samples the process while it trains."""
    stored = recorder.stored()
    if resume and stored is not None and stored.finished and stored.record.steps == record.steps:
        log.info(f"run {record.run_id} finished at {stored.record.finished_at:%Y-%m-%d %H:%M:%S %Z} "
                 f"({stored.recorded_steps} of {record.steps} steps recorded); nothing to train: its stored rows "
                 "are left as they are (resume=False starts it over)")
        return stored
    recorder.start(record, fresh=not resume)
    if recorder.rejections(rejections):
        log.warning(rejection_line(record.run_id, rejections))

    def resumed(point: ResumePoint) -> None:
        for torn in point.skipped:
            log.warning(f"run {record.run_id}: skipped the torn checkpoint {torn.path}: {torn.reason}")
        if point.checkpoint is not None:
            log.info(f"run {record.run_id}: resuming from {point.checkpoint} (step {point.step})")
        recorder.update(resumed_from_step=point.step)

    with observe() as observer, (telemetry or TelemetrySampler()) as sampler:
        result = train(on_step=_both(recorder.step, observer.on_step),
                       on_eval=_both(recorder.evaluation, observer.on_eval),
                       on_sampled=_both(recorder.sampled, observer.on_sampled), on_resume=resumed)
    recorder.finish(recorder.record.finished(result, datetime.now(UTC), sampler.summary()))
    return recorder.stored()


def rejection_line(run_id: str, rejections: Sequence[Rejections]) -> str:
    """One line: each environment's rejections, worded as evaluation words them
    (``envs.rejections.rejection_summary``: the count, then the commonest reasons)."""
    parts = "; ".join(f"{r.stage} {r.dataset}: {rejection_summary(r.rows)}" for r in rejections if r.rows)
    return f"run {run_id}, stored in rejected_rows: {parts}"


def _both(first: Callable[[Any], None], then: Callable[[Any], None] | None) -> Callable[[Any], None]:
    def call(value: Any) -> None:
        first(value)
        if then is not None:
            then(value)

    return call
