"""The ``training_runs`` row of a finished run, as a typed record."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from aerorl_ops.config.training import Recipe, TrainingSettings
from aerorl_ops.rl.record.result import TrainingResult
from aerorl_ops.rl.record.rows import TrainingRunRecord, step_rows
from aerorl_ops.rl.step.stats import StepStats
from aerorl_ops.storage.duckdb_store import ensure_tables
from aerorl_ops.storage.training_schema import TRAINING_STEPS
from aerorl_ops.telemetry import TelemetrySample, summarize


def test_a_finished_run_becomes_one_record():
    settings = TrainingSettings(quant_bits=4, algorithm="grpo", warmup_steps=5, steps=3).resolve()
    result = TrainingResult(Path("runs/r"), final_checkpoint=Path("runs/r/step-8"), reference_source="runs/r/warmup",
                            resumed_from_step=6)
    telemetry = summarize([TelemetrySample(0.1, rss_mb=700.0, cpu_pct=90.0, gpus=())], duration_s=0.1,
                          interval_s=0.1)
    started, finished = datetime(2026, 3, 4, 2, tzinfo=UTC), datetime(2026, 3, 4, 3, tzinfo=UTC)
    record = TrainingRunRecord.of("r", "/models/tiny", settings, result, started, finished, telemetry)
    assert dataclasses.astuple(record)[:14] == ("r", "/models/tiny", "easy_vqa", "grpo", 4, "bitsandbytes-nf4",
                                                "runs/r/warmup", False, "runs/r/step-8", 8, 6, None, None, None)
    assert json.loads(record.config) == dataclasses.asdict(settings)  # one copy of the recipe, nothing else
    assert Recipe(**json.loads(record.config)) == settings
    assert (record.started_at, record.finished_at) == (started, finished)
    assert json.loads(record.telemetry) == telemetry.as_record()
    assert record.reference_unquantized is None  # no quantized reference loaded


def test_a_run_records_the_layers_its_quantized_reference_kept_in_full_precision():
    settings = TrainingSettings(quant_bits=8).resolve()
    result = TrainingResult(Path("runs/r"), final_checkpoint=Path("runs/r/step-2"), reference_source="runs/r/warmup",
                            reference_loaded=True,
                            reference_unquantized=("model.multi_modal_projector.linear_1", "lm_head"))
    started = datetime(2026, 3, 4, 2, tzinfo=UTC)
    telemetry = summarize([TelemetrySample(0.1, rss_mb=700.0, cpu_pct=90.0, gpus=())], duration_s=0.1,
                          interval_s=0.1)
    record = TrainingRunRecord.of("r", "/models/aya", settings, result, started, started, telemetry)
    assert json.loads(record.reference_unquantized) == ["model.multi_modal_projector.linear_1", "lm_head"]


def test_value_head_stats_become_columns_null_without_a_value_head(tmp_path):
    common = dict(loss=0.1, reward_mean=0.5, reward_std=0.5, accuracy=0.5, kl=0.01, entropy=1.0, clip_fraction=0.1,
                  response_clip_ratio=0.0, response_length=2.0, masked_token_fraction=0.1,
                  vision_token_fraction=0.5, tokens_per_s=10.0, step_s=1.0, grad_norm=0.5, learning_rate=1e-3,
                  skipped=False, peak_memory_mb=100.0, approx_kl=0.002, dual_clip_fraction=0.0)
    steps = [StepStats(step=1, phase="grpo", **common),
             StepStats(step=2, phase="ppo", **common, value_loss=0.2, value_clip_fraction=0.05, explained_variance=0.3)]
    with duckdb.connect(str(tmp_path / "t.duckdb")) as conn:
        conn.execute("CREATE TABLE training_steps (run_id VARCHAR NOT NULL, step INTEGER NOT NULL, loss DOUBLE)")
        ensure_tables(conn, [TRAINING_STEPS])  # an older table gains the new columns
        conn.register("rows", step_rows("r", steps))
        conn.execute("INSERT INTO training_steps BY NAME SELECT * FROM rows")
        got = conn.execute("SELECT step, approx_kl, value_loss, value_clip_fraction, explained_variance "
                           "FROM training_steps ORDER BY step").fetchall()
    assert got == [(1, 0.002, None, None, None), (2, 0.002, 0.2, 0.05, 0.3)]
