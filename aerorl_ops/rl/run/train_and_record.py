"""A training run recorded as it happens: what the ``rl_run`` asset and each torchrun rank run.

:func:`train_and_record` is the whole program of a run of ``TrainingSettings``: its id
(``training_run_id``), the report database checked, the environments (over the cached rows the caller
hands it where they hold what the sources give, ``rl.run.inputs.run_environments``; one log line each
says where it came from), the base model's location and configured chat template, and the rollout
engine, then on the main rank :func:`record_training` of a
``TrainingRun`` reporting to the recorder, the progress lines and TensorBoard (plus the caller's
reporter); another rank only trains.

:func:`record_training`:
1. A run whose stored row is finished, for the same number of steps, is not trained again when it is
   resumed: one log line says so, and the stored run is returned as it is.
2. Else the ``training_runs`` row is written (``resume=False``: the run's earlier rows are deleted
   first), then the rows the training and held-out environments rejected (one warning line: the count
   and the first reasons).
3. The run trains, reporting to the recorder (:class:`RecorderReporter`) first, then to the caller's
   reporters: every step and evaluation is stored when it ends, before anything else sees it. Where it
   resumes is logged, with each torn checkpoint it skipped as a warning.
4. The row is completed, and the run is returned as stored: steps and evaluations made by an earlier,
   killed process of the same run included.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import torch

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.config.training import Recipe, TrainingSettings
from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.envs.cached import EnvInput
from aerorl_ops.envs.judged import judge_loader, named_judged_env
from aerorl_ops.envs.rejections import rejection_summary
from aerorl_ops.eval_runner.held_out import EvalResult
from aerorl_ops.models.loading import resolve_device
from aerorl_ops.reporting.tensorboard import TensorBoardLogger, tensorboard_dir
from aerorl_ops.reporting.training_plots import training_plots_dir
from aerorl_ops.rl.record.recorder import (
    HELD_OUT_STAGE,
    ROLLOUT_IMAGES_DIR,
    TRAINING_STAGE,
    VALIDATION_STAGE,
    Connect,
    Rejections,
    RunRecorder,
    StoredRun,
)
from aerorl_ops.rl.record.reporters import (
    NULL_REPORTER,
    FiguresReporter,
    Log,
    NullReporter,
    ProgressReporter,
    Reporters,
    RunReporter,
    TensorBoardReporter,
)
from aerorl_ops.rl.record.result import SampledEval, TrainingResult
from aerorl_ops.rl.record.rows import TrainingRunRecord
from aerorl_ops.rl.run.embedded_builds import EMBEDDED_BUILDERS
from aerorl_ops.rl.run.inputs import (
    base_model_dtype,
    base_model_source,
    distribution_stage,
    rollout_engine_of,
    run_environments,
)
from aerorl_ops.rl.run.lock import remove_leftovers, run_lock
from aerorl_ops.rl.run.phases import TrainingRun
from aerorl_ops.rl.run.run_id import training_run_id
from aerorl_ops.rl.runtime.checkpoint_files import ResumePoint
from aerorl_ops.rl.runtime.distributed import SINGLE, DataParallel
from aerorl_ops.rl.step.rollout_samples import RolloutSample
from aerorl_ops.rl.step.stats import StepStats
from aerorl_ops.storage.database_check import check_report_database
from aerorl_ops.telemetry import TelemetrySampler


@dataclass(frozen=True)
class RunOptions:
    """What names or shows a run but does not change what it trains (``rl_run``'s run fields)."""

    run_name: str  # empty: the id is derived from the settings (``training_run_id``)
    resume: bool
    progress_bar: bool
    wandb_project: str  # empty: TensorBoard only
    wandb_mode: str


@dataclass(frozen=True)
class ModelPlace:
    """Where models come from and run (the model runtime's values)."""

    models_dir: Path
    local_files_only: bool
    device: str  # "auto", "cpu" or "cuda[:N]"
    torch_threads: int  # 0 keeps torch's default
    telemetry_interval_s: float


@dataclass(frozen=True)
class ReportPlace:
    """Where a run's rows, TensorBoard files and checkpoints go: ``connect`` opens the report database
    at ``database``; checkpoints under ``checkpoints_dir/<run id>``."""

    database: str
    connect: Connect
    checkpoints_dir: Path


class RecorderReporter(NullReporter):
    """Each step and evaluation of run ``run_id`` stored by ``recorder`` as it ends; where the run
    resumes logged (each torn checkpoint skipped as a warning) and stored."""

    def __init__(self, recorder: RunRecorder, run_id: str, log: Log) -> None:
        self.recorder, self.run_id, self.log = recorder, run_id, log

    def on_resume(self, point: ResumePoint) -> None:
        for torn in point.skipped:
            self.log.warning(f"run {self.run_id}: skipped the torn checkpoint {torn.path}: {torn.reason}")
        if point.checkpoint is not None:
            self.log.info(f"run {self.run_id}: resuming from {point.checkpoint} (step {point.step})")
        self.recorder.update(resumed_from_step=point.step)

    def on_step(self, stats: StepStats) -> None:
        self.recorder.step(stats)

    def on_eval(self, evaluation: EvalResult) -> None:
        self.recorder.evaluation(evaluation)

    def on_sampled(self, sampled: SampledEval) -> None:
        self.recorder.sampled(sampled)

    def on_rollouts(self, samples: Sequence[RolloutSample]) -> None:
        self.recorder.rollouts(samples)


def record_training(recorder: RunRecorder, record: TrainingRunRecord, train: Callable[[RunReporter], TrainingResult],
                    rejections: Sequence[Rejections], log: Log, resume: bool = True,
                    reporters: Callable[[], RunReporter] = NullReporter,
                    telemetry: TelemetrySampler | None = None) -> StoredRun:
    """Train and record the run of ``record`` (:meth:`TrainingRunRecord.started`) as the module docstring
    says. ``train`` runs a ``TrainingRun`` reporting to the reporter it is given; ``reporters`` opens the
    caller's, only when the run trains (closed when it ends); ``telemetry`` samples the process while it
    trains."""
    stored = recorder.stored()
    if resume and stored is not None and stored.finished and stored.record.steps == record.steps:
        log.info(f"run {record.run_id} finished at {stored.record.finished_at:%Y-%m-%d %H:%M:%S %Z} "
                 f"({stored.recorded_steps} of {record.steps} steps recorded); nothing to train: its stored rows "
                 "are left as they are (resume=False starts it over)")
        return stored
    recorder.start(record, fresh=not resume)
    if recorder.rejections(rejections):
        log.warning(rejection_line(record.run_id, rejections))
    outside = reporters()
    try:
        with (telemetry or TelemetrySampler()) as sampler:
            result = train(Reporters([RecorderReporter(recorder, record.run_id, log), outside]))
    finally:
        outside.close()
    recorder.finish(recorder.record.finished(result, datetime.now(UTC), sampler.summary()))
    return recorder.stored()


def run_rejections(train_env: TaskEnv, held_out: TaskEnv, validation: TaskEnv | None,
                   distributions: Mapping[str, TaskEnv] | None = None) -> list[Rejections]:
    """What each environment of a run rejected: training, held-out, (when the run has one) the sampled
    evaluations' validation environment, and each held-out distribution (its ``distribution_stage``)."""
    envs = [(TRAINING_STAGE, train_env), (HELD_OUT_STAGE, held_out), (VALIDATION_STAGE, validation),
            *((distribution_stage(name), env) for name, env in (distributions or {}).items())]
    return [Rejections(stage, env.name, env.rejected) for stage, env in envs if env is not None]


def rejection_line(run_id: str, rejections: Sequence[Rejections]) -> str:
    """One line: each environment's rejections, worded as evaluation words them
    (``envs.rejections.rejection_summary``: the count, then the commonest reasons)."""
    parts = "; ".join(f"{r.stage} {r.dataset}: {rejection_summary(r.rows)}" for r in rejections if r.rows)
    return f"run {run_id}, stored in rejected_rows: {parts}"


def short_held_out_line(run_id: str, asked: int, held_out: TaskEnv) -> str:
    """One line: the held-out sample is smaller than ``eval_size``, and why (rejected rows, or a short split)."""
    why = (f"of the rows drawn, {rejection_summary(held_out.rejected)} (stored in rejected_rows)"
           if held_out.rejected else f"{held_out.name} has no more usable rows")
    return f"run {run_id}: the held-out sample has {len(held_out)} questions, not the {asked} asked: {why}"


@dataclass(frozen=True)
class RecordedRun:
    """A run as stored once :func:`train_and_record` ends (the main rank's)."""

    run_id: str
    stored: StoredRun
    inputs: dict[str, EnvInput]  # where each environment came from, by stage (RunEnvironments.inputs)


def input_line(run_id: str, stage: str, came: EnvInput) -> str:
    """One line: where the ``stage`` environment of run ``run_id`` came from (its cached rows, else its source
    and why), how many items it holds and their content hash."""
    where = "its cached rows" if came.cached else f"its source ({came.why_source})"
    return (f"run {run_id}: {stage} items of {came.dataset.name} ({came.dataset.split}) from {where}: "
            f"{came.items} items, sha256 {came.content_sha256[:12]}")


def train_and_record(bench: BenchmarkConfig, settings: TrainingSettings, options: RunOptions, place: ModelPlace,
                     report: ReportPlace, log: Log, dp: DataParallel = SINGLE,
                     reporter: RunReporter = NULL_REPORTER,
                     cached: Mapping[str, pa.Table] | None = None) -> RecordedRun | None:
    """Build the run of ``settings`` (checked where they came in, resolved here once into the run's
    ``Recipe``) and train it, recorded (module docstring). ``dp`` is this process's rank: the main rank (and
    the single process) logs, reports to the progress lines, TensorBoard, DuckDB and ``reporter``, and
    returns the run as stored; another rank only trains and returns None. ``cached``: the tables of the
    environments' cached rows by stage (``rl.run.inputs.run_environments``), when the caller has them."""
    recipe = settings.resolve()  # as the run trains them: what the trainer, the record and TensorBoard take
    run_id = training_run_id(settings, recipe, options.run_name)
    check_report_database(report.database)  # a damaged report database is named before any work
    if not dp.is_main:  # the main rank holds the run's lock for every rank
        _train_and_record(bench, recipe, options, place, report, log, dp, reporter, run_id, cached)
        return None
    with run_lock(report.checkpoints_dir, run_id, log):  # one process per run (a second is refused)
        remove_leftovers(report.checkpoints_dir / run_id, run_id, log)
        return _train_and_record(bench, recipe, options, place, report, log, dp, reporter, run_id, cached)


def _train_and_record(bench: BenchmarkConfig, settings: Recipe, options: RunOptions, place: ModelPlace,
                      report: ReportPlace, log: Log, dp: DataParallel, reporter: RunReporter,
                      run_id: str, cached: Mapping[str, pa.Table] | None) -> RecordedRun | None:
    envs = run_environments(settings, bench.seed + settings.seed, bench.datasets, cached)  # before a model
    train_env = named_judged_env(envs.train, settings.env, bench, judge_loader(  # [datasets.<env>] judge = "<key>"
        bench, place.models_dir, resolve_device(place.device), place.local_files_only, EMBEDDED_BUILDERS))
    held_out, validation = envs.held_out, envs.validation
    if dp.is_main:  # a caller with cached rows expects each environment from them: any other is a warning
        for stage, came in envs.inputs.items():
            (log.warning if cached is not None and not came.cached else log.info)(input_line(run_id, stage, came))
    if len(held_out) < settings.eval_size:
        log.warning(short_held_out_line(run_id, settings.eval_size, held_out))
    base = base_model_source(settings.base_model, bench, place.models_dir, place.local_files_only)
    rollout_engine = rollout_engine_of(settings.base_model, bench)
    if place.torch_threads > 0:
        torch.set_num_threads(place.torch_threads)

    def train(to: RunReporter = NULL_REPORTER) -> TrainingResult:
        return TrainingRun(base.location, report.checkpoints_dir / run_id, settings, train_env, held_out,
                           list(range(len(held_out))), device=place.device, resume=options.resume,
                           validation_env=validation, dp=dp, rollout_engine=rollout_engine, evaluation=bench.eval,
                           reporter=to, dtype=base_model_dtype(settings.base_model, bench),
                           chat_template=base.chat_template, decode=base.backend.decode,
                           distributions=envs.distributions).run()

    if not dp.is_main:
        train()
        return None

    def outside() -> RunReporter:
        board = TensorBoardLogger(tensorboard_dir(Path(report.database).parent, run_id),
                                  wandb_project=options.wandb_project or None, wandb_mode=options.wandb_mode,
                                  run_name=run_id, config={**asdict(settings), **asdict(options)})
        return Reporters([TensorBoardReporter(board),
                          ProgressReporter(log, run_id, settings.total_steps, options.progress_bar),
                          FiguresReporter(report.connect, run_id, training_plots_dir(report.database, run_id)),
                          reporter])

    stored = record_training(
        RunRecorder(report.connect, run_id, Path(report.database).parent / ROLLOUT_IMAGES_DIR),
        TrainingRunRecord.started(run_id, base.location, settings, datetime.now(UTC)),
        train, run_rejections(train_env, held_out, validation, envs.distributions),
        log, resume=options.resume, reporters=outside,
        telemetry=TelemetrySampler(interval_s=place.telemetry_interval_s, device=resolve_device(place.device)))
    return RecordedRun(run_id, stored, envs.inputs)
