"""The run recorder: rows appended by key as they happen, a run started over, and the rows a training
dataset rejects stored and counted with the run."""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime
from functools import partial

import duckdb
import pytest
import torch

from aerorl_ops.config.training import TRAINING_DEFAULTS, TrainingSettings
from aerorl_ops.envs.registry import make_env
from aerorl_ops.envs.rejections import rejection_summary
from aerorl_ops.eval_metrics.accuracy import accuracy_report
from aerorl_ops.eval_runner.held_out import EvalResult
from aerorl_ops.rl.record.recorder import HELD_OUT_STAGE, TRAINING_STAGE, Rejections, RunRecorder
from aerorl_ops.rl.record.rows import TrainingRunRecord
from aerorl_ops.rl.run.inputs import training_environments
from aerorl_ops.rl.run.phases import TrainingRun
from aerorl_ops.rl.run.train_and_record import record_training, run_rejections
from aerorl_ops.rl.step.stats import StepStats
from aerorl_ops.rows.load_result import RejectedRow
from tests.aerorl_ops.rl.run.test_run_inputs import shapes_dataset

SETTINGS = TrainingSettings(group_size=2, kl_coef=0.0, max_new_tokens=2, warmup_steps=1, warmup_batch_size=2,
                            steps=0, eval_interval=10, control=False, swap_check_type="")
START = datetime(2026, 3, 4, 2, tzinfo=UTC)


def stats(step: int, loss: float) -> StepStats:
    return StepStats(step=step, phase="warmup", loss=loss, reward_mean=None, reward_std=None, accuracy=None, kl=None,
                     entropy=None, clip_fraction=None, response_clip_ratio=None, response_length=1.0,
                     masked_token_fraction=0.5, vision_token_fraction=0.5, tokens_per_s=1.0, step_s=1.0,
                     grad_norm=1.0, learning_rate=1e-3, skipped=False, peak_memory_mb=1.0)


def evaluation(step: int, phase: str, answers: list[tuple[str, bool]]) -> EvalResult:
    return EvalResult(step, phase, None, {}, accuracy_report(answers))


def rows(database, sql: str) -> list[tuple]:
    with duckdb.connect(str(database), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def record(run_id: str, started_at: datetime = START) -> TrainingRunRecord:
    return TrainingRunRecord.started(run_id, "/models/tiny", SETTINGS.resolve(), started_at)


def test_rows_are_upserted_by_key_and_a_resumed_run_keeps_its_start(tmp_path):
    database = tmp_path / "t.duckdb"
    recorder = RunRecorder(partial(duckdb.connect, str(database)), "r")
    recorder.start(record("r"), fresh=False)
    recorder.step(stats(1, 0.5))
    recorder.step(stats(2, 0.25))
    recorder.evaluation(evaluation(0, "base", [("colour", False), ("shape", True)]))
    again = RunRecorder(partial(duckdb.connect, str(database)), "r")  # a second process, resuming
    assert again.start(record("r", datetime(2026, 3, 5, tzinfo=UTC)), fresh=False).started_at == START
    again.step(stats(2, 0.25))  # the step after the checkpoint, trained again
    again.evaluation(evaluation(0, "base", [("colour", False), ("shape", True)]))
    assert rows(database, "SELECT step, loss FROM training_steps ORDER BY step") == [(1, 0.5), (2, 0.25)]
    assert rows(database, "SELECT phase, accuracy, n FROM training_evals") == [("base", 0.5, 2)]
    assert rows(database, "SELECT question_type, accuracy FROM training_eval_types ORDER BY 1") == [
        ("colour", 0.0), ("shape", 1.0)]
    assert rows(database, "SELECT started_at, finished_at FROM training_runs") == [(START, None)]


def test_a_run_started_over_deletes_only_its_own_earlier_rows(tmp_path):
    database = tmp_path / "t.duckdb"
    for run_id in ("r", "other"):
        recorder = RunRecorder(partial(duckdb.connect, str(database)), run_id)
        recorder.start(record(run_id), fresh=True)
        recorder.step(stats(1, 0.5))
        recorder.evaluation(evaluation(0, "base", [("colour", True)]))
        recorder.rejections([Rejections(TRAINING_STAGE, "shapes", [RejectedRow("f", "f#row=3", None, "bad")])])
    RunRecorder(partial(duckdb.connect, str(database)), "r").start(record("r"), fresh=True)
    for table in ("training_steps", "training_evals", "training_eval_types", "rejected_rows"):
        assert rows(database, f"SELECT DISTINCT run_id FROM {table}") == [("other",)], table
    assert rows(database, "SELECT run_id, rejected_rows FROM training_runs ORDER BY 1") == [("other", 1), ("r", None)]


def test_a_jsonl_training_datasets_rejected_rows_are_stored_and_counted(tiny_model_dir, tmp_path, caplog):
    torch.set_num_threads(1)
    dataset = shapes_dataset(tmp_path, "shapes", ["red", "blue", "green"])  # + 1 line naming a missing image
    with open(dataset.path, "a") as handle:
        handle.write('{"id": "broken", "question": \n')  # + 1 line that is not JSON
    settings = dataclasses.replace(TRAINING_DEFAULTS, env="shapes", eval_size=10)
    train_env, held_out = training_environments(settings, 0, [dataset])
    recorder = RunRecorder(partial(duckdb.connect, str(tmp_path / "t.duckdb")), "jsonl-run")

    def train(reporter):
        return TrainingRun(str(tiny_model_dir), tmp_path / "run", SETTINGS.resolve(), train_env, held_out, [0, 1],
                           device="cpu", resume=False, reporter=reporter).run()

    with caplog.at_level(logging.INFO, logger="recorder-test"):
        run = record_training(recorder, record("jsonl-run"), train,
                              [Rejections(TRAINING_STAGE, train_env.name, train_env.rejected),
                               Rejections(HELD_OUT_STAGE, held_out.name, held_out.rejected)],
                              logging.getLogger("recorder-test"), resume=False)
    stored = rows(tmp_path / "t.duckdb", "SELECT stage, dataset, locator, sample_id, reason FROM rejected_rows "
                                         "WHERE run_id = 'jsonl-run'")
    expected = [(stage, "shapes", r.locator, r.sample_id, r.reason)
                for stage, env in (("training", train_env), ("held_out", held_out)) for r in env.rejected]
    assert sorted(stored) == sorted(expected) and len(stored) == 4
    assert sorted("missing.png" in r.reason for r in train_env.rejected) == [False, True]  # and the broken line
    assert run.record.rejected_rows == 4 and run.finished
    assert rows(tmp_path / "t.duckdb", "SELECT rejected_rows FROM training_runs") == [(4,)]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["run jsonl-run, stored in rejected_rows: "
                        f"training shapes: {rejection_summary(train_env.rejected)}; "
                        f"held_out shapes: {rejection_summary(held_out.rejected)}"]
    assert rejection_summary(train_env.rejected).startswith("2 rows rejected: ")


@pytest.mark.parametrize("fresh", [True, False])
def test_a_recorder_refuses_to_update_a_run_it_has_not_started(tmp_path, fresh):
    recorder = RunRecorder(partial(duckdb.connect, str(tmp_path / "t.duckdb")), "r")
    with pytest.raises(RuntimeError, match="run r: RunRecorder.start must write"):
        recorder.update(rejected_rows=1)
    recorder.start(record("r"), fresh=fresh)
    recorder.update(rejected_rows=1)
    assert rows(tmp_path / "t.duckdb", "SELECT rejected_rows FROM training_runs") == [(1,)]


def test_a_runs_validation_environment_rejections_are_recorded_too(tmp_path):
    """The sampled evaluations' validation environment is the run's third: its rejected rows are
    stored and counted like the training and held-out ones."""
    dataset = shapes_dataset(tmp_path, "shapes", ["red", "blue"])  # + 1 line naming a missing image
    settings = dataclasses.replace(TRAINING_DEFAULTS, env="shapes", eval_size=2)
    train_env, held_out = training_environments(settings, 0, [dataset])
    validation = make_env("jsonl", path=str(dataset.path), name="shapes-validation")
    stages = [(r.stage, r.dataset, len(r.rows)) for r in run_rejections(train_env, held_out, validation)]
    assert stages == [("training", "shapes", 1), ("held_out", "shapes", 1), ("validation", "shapes-validation", 1)]
    assert [r.stage for r in run_rejections(train_env, held_out, None)] == ["training", "held_out"]
