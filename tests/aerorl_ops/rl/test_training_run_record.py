"""The ``training_runs`` row of a finished run, as a typed record."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path

from aerorl_ops.rl.config import AeroRLConfig
from aerorl_ops.rl.training_record import TrainingRunRecord
from aerorl_ops.rl.training_run import TrainingPlan, TrainingResult
from aerorl_ops.telemetry import TelemetrySample, summarize


def test_a_finished_run_becomes_one_record():
    config = AeroRLConfig(quant_ref_bits=4, algorithm="grpo")
    plan = TrainingPlan(warmup_steps=5, rl_steps=3)
    result = TrainingResult(Path("runs/r"), final_checkpoint=Path("runs/r/step-8"), reference_source="runs/r/warmup",
                            resumed_from_step=6)
    telemetry = summarize([TelemetrySample(0.1, rss_mb=700.0, cpu_pct=90.0, gpus=())], duration_s=0.1,
                          interval_s=0.1)
    started, finished = datetime(2026, 3, 4, 2, tzinfo=UTC), datetime(2026, 3, 4, 3, tzinfo=UTC)
    record = TrainingRunRecord.of("r", "/models/tiny", "easy_vqa", config, plan, result, {"steps": 3, "seed": 0},
                                  started, finished, telemetry)
    assert dataclasses.astuple(record)[:14] == ("r", "/models/tiny", "easy_vqa", "grpo", 4, "bitsandbytes-nf4",
                                                "runs/r/warmup", False, "runs/r/step-8", 8, 6, None, None, None)
    assert json.loads(record.config) == {"training": {"steps": 3, "seed": 0}, "aerorl": dataclasses.asdict(config)}
    assert (record.started_at, record.finished_at) == (started, finished)
    assert json.loads(record.telemetry) == telemetry.as_record()
