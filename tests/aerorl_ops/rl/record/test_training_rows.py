"""The training tables' rows, built from their row types (``storage.training_schema``,
``storage.checkpoint_schema``): each value lands in its column, and the run id (and a checkpoint's
``recorded_at``) are shared by every row."""

from __future__ import annotations

import dataclasses
import hashlib
import math
from datetime import UTC, datetime
from functools import partial

import duckdb

from aerorl_ops.eval_metrics.accuracy import accuracy_report
from aerorl_ops.eval_runner.held_out import EvalResult
from aerorl_ops.rl.record.checkpoint_rows import CheckpointRecord, checkpoint_writes
from aerorl_ops.rl.record.recorder import RunRecorder
from aerorl_ops.rl.record.rows import TrainingRunRecord, eval_rows, eval_type_rows, step_rows
from aerorl_ops.rl.step.rollout_samples import RolloutSample
from aerorl_ops.rl.step.stats import StepStats
from aerorl_ops.storage.checkpoint_schema import CHECKPOINTS
from aerorl_ops.storage.training_schema import (
    TRAINING_EVAL_TYPES,
    TRAINING_EVALS,
    TRAINING_STEPS,
    RolloutRow,
    TrainingRunRow,
)

# 4 answers, 3 right: colour 1 of 2, shape 2 of 2
EVALUATION = EvalResult(6, "rl", 0.125, {"verifier": 0.5, "format": -0.25},
                        accuracy_report([("colour", True), ("colour", False), ("shape", True), ("shape", True)]),
                        wall_s=12.5)


def test_an_evaluation_is_one_training_evals_row_with_a_mean_per_reward_component():
    table = eval_rows("r", [EVALUATION])
    assert table.schema == TRAINING_EVALS.schema
    assert table.to_pylist() == [{
        "run_id": "r", "step": 6, "phase": "rl", "wall_s": 12.5, "accuracy": 0.75,
        "accuracy_stderr": math.sqrt(0.75 * 0.25 / 4), "n": 4, "reward_mean": 0.125, "verifier_mean": 0.5,
        "grounding_mean": None, "format_mean": -0.25, "cost_mean": None, "samples": 4, "distribution": None,
        "return_stderr": None, "mean_turns": None, "mean_turns_stderr": None}]


def test_a_held_out_distributions_episodes_fill_their_columns():
    """A multi-turn evaluation of held-out distribution "big": success as accuracy, its episode figures in their
    columns, and each question-type row labelled with the distribution too."""
    from aerorl_ops.eval_metrics.episodes import episode_report

    episodes = episode_report([True, False], [0.9, 0.0], [3, 8])
    evaluation = dataclasses.replace(EVALUATION, episodes=episodes, distribution="big")
    (row,) = eval_rows("r", [evaluation]).to_pylist()
    assert (row["distribution"], row["return_stderr"], row["mean_turns"], row["mean_turns_stderr"]) == (
        "big", episodes.return_stderr, 5.5, 2.5)
    assert {r["distribution"] for r in eval_type_rows("r", [evaluation]).to_pylist()} == {"big"}


def test_an_evaluation_has_a_training_eval_types_row_per_question_type():
    table = eval_type_rows("r", [EVALUATION])
    assert table.schema == TRAINING_EVAL_TYPES.schema
    assert table.to_pylist() == [
        {"run_id": "r", "step": 6, "phase": "rl", "question_type": "colour", "accuracy": 0.5, "n": 2,
         "distribution": None},
        {"run_id": "r", "step": 6, "phase": "rl", "question_type": "shape", "accuracy": 1.0, "n": 2,
         "distribution": None}]
    assert eval_rows("r", []).num_rows == eval_type_rows("r", []).num_rows == 0


def test_a_steps_statistics_are_its_training_steps_row_after_the_run_id():
    stats = StepStats(step=3, phase="grpo", loss=0.25, reward_mean=0.5, reward_std=0.5, accuracy=0.75, kl=None,
                      entropy=1.5, clip_fraction=0.0, response_clip_ratio=0.25, response_length=7.0,
                      masked_token_fraction=0.5, vision_token_fraction=0.125, tokens_per_s=64.0, step_s=2.0,
                      grad_norm=1.0, learning_rate=1e-5, skipped=False, peak_memory_mb=512.0, episodes_seen=2**33,
                      groups_sampled=4, behaviour_step=2)
    (row,) = step_rows("r", [stats]).to_pylist()
    assert list(row) == list(TRAINING_STEPS.column_names)
    assert row == {"run_id": "r", **dataclasses.asdict(stats)}
    assert (row["episodes_seen"], row["value_loss"]) == (2**33, None)  # BIGINT; an unset statistic is NULL


def test_a_checkpoint_record_is_its_checkpoints_row_with_the_time_it_was_recorded():
    record = CheckpointRecord("r", 4, "r@4", 2, True, "/ckpt/r/step-4", "ab" * 32, "/models/tiny", 0.5, 8)
    at = datetime(2026, 3, 4, 2, 0, 1, tzinfo=UTC)
    (write,) = checkpoint_writes([record], at)
    assert (write.spec, dict(write.key)) == (CHECKPOINTS, {"run_id": "r", "step": 4})
    assert write.rows.to_pylist() == [{**dataclasses.asdict(record), "recorded_at": at}]


def test_the_rl_record_types_are_the_stored_row_types_plus_what_is_not_a_column():
    def names(record_type: type) -> list[str]:
        return [f.name for f in dataclasses.fields(record_type)]

    assert names(TrainingRunRecord) == names(TrainingRunRow)
    assert names(RolloutSample) == [*names(RolloutRow), "images"]


def test_a_rollout_sample_is_stored_as_its_columns_and_each_of_its_images_once(tmp_path):
    first, second = b"\x89PNG not really", b"\x89PNG nor this"
    one, two = hashlib.sha256(first).hexdigest(), hashlib.sha256(second).hexdigest()
    samples = [RolloutSample(5, 0, "item-1", "Same colour?", [one, two, one], "no", 1.0, True, 0.5, 2, -0.75,
                             (first, second, first)),
               RolloutSample(5, 3, "item-2", "What is 2 + 2?", [], "4", 0.0, False, -0.5, 3, -1.25)]
    connect = partial(duckdb.connect, str(tmp_path / "r.duckdb"))
    RunRecorder(connect, "r", tmp_path / "images").rollouts(samples)
    with connect() as conn:
        stored = conn.execute("SELECT * FROM training_rollouts ORDER BY row").fetchall()
    assert stored == [("r", 5, 0, "item-1", "Same colour?", [one, two, one], "no", 1.0, True, 0.5, 2, -0.75),
                      ("r", 5, 3, "item-2", "What is 2 + 2?", [], "4", 0.0, False, -0.5, 3, -1.25)]
    assert sorted(p.name for p in (tmp_path / "images").iterdir()) == sorted([one, two])
    assert [(tmp_path / "images" / digest).read_bytes() for digest in (one, two)] == [first, second]


def test_a_rollouts_table_made_before_keeps_its_rows_and_takes_every_image_now(tmp_path):
    """A ``training_rollouts`` table of an older version held the first image's hash in ``image_sha256``: it
    gains ``image_sha256s`` (NULL in its old rows), and new rows fill that column."""
    connect = partial(duckdb.connect, str(tmp_path / "r.duckdb"))
    with connect() as conn:
        conn.execute("CREATE TABLE training_rollouts (run_id VARCHAR NOT NULL, step INTEGER NOT NULL, "
                     "row INTEGER NOT NULL, prompt_id VARCHAR, question VARCHAR, image_sha256 VARCHAR, "
                     "completion VARCHAR, reward DOUBLE, correct BOOLEAN, advantage DOUBLE, length INTEGER, "
                     "logprob_sum DOUBLE)")
        conn.execute("INSERT INTO training_rollouts VALUES ('old', 1, 0, 'i', 'Q?', 'abc', 'a', 1, true, 0, 1, -1)")
    RunRecorder(connect, "r", tmp_path / "images").rollouts(
        [RolloutSample(5, 0, "item-1", "Q?", ["d"], "a", 1.0, True, 0.5, 2, -0.75, (b"png",))])
    with connect() as conn:
        stored = conn.execute("SELECT run_id, image_sha256, image_sha256s FROM training_rollouts "
                              "ORDER BY run_id").fetchall()
    assert stored == [("old", "abc", None), ("r", None, ["d"])]
