"""Each DuckDB table is declared once, as an Arrow schema: the DDL, the partition-output schemas and
the typed records all derive from it or are checked against it, and a record lands in DuckDB intact."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from aerorl_ops.generation.generations_table import GENERATION_SCHEMA
from aerorl_ops.reporting.partition_summary import SummaryRow
from aerorl_ops.rl.record.rows import TrainingRunRecord
from aerorl_ops.rl.step.stats import StepStats
from aerorl_ops.scoring.partition_scores import SCORE_SCHEMA
from aerorl_ops.storage.duckdb_store import ensure_tables, replace_partition
from aerorl_ops.storage.schema import (
    BENCHMARK_KEY,
    BENCHMARK_SUMMARY,
    BENCHMARK_TABLES,
    GENERATIONS,
    REWARD_SCORES,
    TableSpec,
    duckdb_type,
)
from aerorl_ops.storage.training_schema import TRAINING_RUNS, TRAINING_STEPS, TRAINING_TABLES

# The tables as the pipeline has always written them (DuckDB's DESCRIBE, TIMESTAMPTZ abbreviated).
# A change here changes every report database: it needs a migration, not just a new schema.
TABLES = {
    "runs": (
        "run_id VARCHAR NOT NULL, kind VARCHAR NOT NULL, started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ, "
        "git_sha VARCHAR, config JSON, seeds JSON, library_versions JSON, input_hashes JSON"
    ),
    "generations": (
        "run_id VARCHAR NOT NULL, model_key VARCHAR NOT NULL, batch_size INTEGER NOT NULL, sample_id VARCHAR "
        "NOT NULL, dataset VARCHAR, prompt VARCHAR, response VARCHAR, raw_response VARCHAR, reference "
        "VARCHAR[], evidence_entities VARCHAR[], claimed_entities VARCHAR[], latency_ms DOUBLE, "
        "batch_latency_ms DOUBLE, generated_tokens INTEGER, prompt_text_tokens INTEGER, vision_tokens "
        "INTEGER, batch_index INTEGER, dagster_run_id VARCHAR, image_count INTEGER, video_frames INTEGER"
    ),
    "reward_scores": (
        "run_id VARCHAR NOT NULL, model_key VARCHAR NOT NULL, batch_size INTEGER NOT NULL, sample_id VARCHAR "
        "NOT NULL, dataset VARCHAR, verifier DOUBLE, grounding DOUBLE, format DOUBLE, cost DOUBLE, "
        "total_reward DOUBLE, passed BOOLEAN, manual_pass BOOLEAN, anls DOUBLE, relaxed_accuracy DOUBLE, "
        "correct BOOLEAN, reward_config JSON, judge DOUBLE, cell_accuracy DOUBLE"
    ),
    "benchmark_summary": (
        "run_id VARCHAR NOT NULL, model_key VARCHAR NOT NULL, batch_size INTEGER NOT NULL, dataset VARCHAR NOT "
        "NULL, model_source VARCHAR, device VARCHAR, samples INTEGER, wall_s DOUBLE, samples_per_s DOUBLE, "
        "generated_tokens_per_s DOUBLE, latency_avg_ms DOUBLE, latency_p50_ms DOUBLE, latency_p95_ms DOUBLE, "
        "model_load_s DOUBLE, pass_rate DOUBLE, manual_pass_rate DOUBLE, manual_false_passes INTEGER, "
        "average_reward DOUBLE, verifier_avg DOUBLE, grounding_avg DOUBLE, format_avg DOUBLE, cost_avg "
        "DOUBLE, anls_avg DOUBLE, relaxed_accuracy_avg DOUBLE, verifier_metric_agreement DOUBLE, "
        "accuracy DOUBLE, peak_memory_mb DOUBLE, gpu_seen BOOLEAN, gpu_util_avg DOUBLE, gpu_util_max DOUBLE, "
        "gpu_memory_avg_mb "
        "DOUBLE, gpu_memory_max_mb DOUBLE, gpu_power_avg_w DOUBLE, cpu_percent_avg DOUBLE, rss_max_mb DOUBLE, "
        "created_at TIMESTAMPTZ"
    ),
    "rejected_rows": (
        "run_id VARCHAR NOT NULL, stage VARCHAR NOT NULL, dataset VARCHAR, locator VARCHAR, sample_id "
        "VARCHAR, reason VARCHAR NOT NULL"
    ),
    "training_runs": (
        "run_id VARCHAR NOT NULL, base_model VARCHAR, env VARCHAR, algorithm VARCHAR, quant_bits INTEGER, "
        "reference_quantization_mode VARCHAR, reference_source VARCHAR, reference_loaded BOOLEAN, "
        "final_checkpoint VARCHAR, steps INTEGER, resumed_from_step INTEGER, swap_question_type VARCHAR, "
        "swap_questions INTEGER, swap_changed DOUBLE, config JSON, started_at TIMESTAMPTZ, finished_at "
        "TIMESTAMPTZ, telemetry JSON, rejected_rows INTEGER, reference_unquantized JSON, state_bytes_per_rank BIGINT"
    ),
    "training_steps": (
        "run_id VARCHAR NOT NULL, step INTEGER NOT NULL, phase VARCHAR, loss DOUBLE, reward_mean DOUBLE, "
        "reward_std DOUBLE, accuracy DOUBLE, kl DOUBLE, entropy DOUBLE, clip_fraction DOUBLE, "
        "response_clip_ratio DOUBLE, response_length DOUBLE, masked_token_fraction DOUBLE, "
        "vision_token_fraction DOUBLE, tokens_per_s DOUBLE, step_s DOUBLE, grad_norm DOUBLE, learning_rate "
        "DOUBLE, skipped BOOLEAN, peak_memory_mb DOUBLE, curriculum_stage INTEGER, episodes_seen BIGINT, "
        "approx_kl DOUBLE, dual_clip_fraction DOUBLE, value_loss DOUBLE, value_clip_fraction DOUBLE, "
        "explained_variance DOUBLE, groups_sampled INTEGER, groups_kept INTEGER, groups_dropped INTEGER, "
        "groups_filled INTEGER, sampling_rounds INTEGER, padded_token_fraction DOUBLE, "
        "behaviour_step INTEGER, accuracy_by_source JSON, scoring_path VARCHAR, rollout_s DOUBLE, scoring_s DOUBLE, "
        "update_s DOUBLE, decode_path VARCHAR"
    ),
    "training_evals": (
        "run_id VARCHAR NOT NULL, step INTEGER NOT NULL, phase VARCHAR, wall_s DOUBLE, accuracy DOUBLE, "
        "accuracy_stderr DOUBLE, n INTEGER, reward_mean DOUBLE, verifier_mean DOUBLE, grounding_mean DOUBLE, "
        "format_mean DOUBLE, cost_mean DOUBLE, samples INTEGER, distribution VARCHAR, return_stderr DOUBLE, "
        "mean_turns DOUBLE, mean_turns_stderr DOUBLE"
    ),
    "training_eval_types": (
        "run_id VARCHAR NOT NULL, step INTEGER NOT NULL, phase VARCHAR NOT NULL, question_type VARCHAR NOT NULL, "
        "accuracy DOUBLE, n INTEGER, distribution VARCHAR"
    ),
    "training_eval_sources": (
        "run_id VARCHAR NOT NULL, step INTEGER NOT NULL, phase VARCHAR NOT NULL, source VARCHAR NOT NULL, "
        "accuracy DOUBLE, n INTEGER, distribution VARCHAR"
    ),
    "training_rollouts": (
        "run_id VARCHAR NOT NULL, step INTEGER NOT NULL, row INTEGER NOT NULL, prompt_id VARCHAR, question "
        "VARCHAR, image_sha256s VARCHAR[], completion VARCHAR, reward DOUBLE, correct BOOLEAN, advantage DOUBLE, "
        "length INTEGER, logprob_sum DOUBLE"
    ),
}

KEY = {"run_id": "r1", "model_key": "tiny", "batch_size": 4}


def described(conn: duckdb.DuckDBPyConnection, table: str) -> str:
    return ", ".join(f"{name} {kind.replace('TIMESTAMP WITH TIME ZONE', 'TIMESTAMPTZ')}"
                     + ("" if null == "YES" else " NOT NULL")
                     for name, kind, null, *_ in conn.execute(f"DESCRIBE {table}").fetchall())


def test_the_tables_duckdb_creates_are_the_ones_always_written():
    with duckdb.connect(":memory:") as conn:
        ensure_tables(conn, BENCHMARK_TABLES + TRAINING_TABLES)
        assert {spec.name: described(conn, spec.name) for spec in BENCHMARK_TABLES + TRAINING_TABLES} == TABLES


def test_ddl_is_derived_from_the_arrow_schema():
    spec = TableSpec("t", pa.schema([
        pa.field("id", pa.string(), nullable=False),
        ("n", pa.int32()),
        ("big", pa.int64()),
        ("x", pa.float64()),
        ("ok", pa.bool_()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("names", pa.list_(pa.string())),
        ("settings", pa.json_()),
    ]), ("id",))
    assert spec.ddl() == (
        "CREATE TABLE IF NOT EXISTS t (\n  id VARCHAR NOT NULL,\n  n INTEGER,\n  big BIGINT,\n  x DOUBLE,\n"
        "  ok BOOLEAN,\n  at TIMESTAMPTZ,\n  names VARCHAR[],\n  settings JSON\n)")
    assert spec.column_names == ("id", "n", "big", "x", "ok", "at", "names", "settings")


def test_a_type_without_a_duckdb_column_type_is_refused_where_the_table_is_declared():
    with pytest.raises(ValueError, match="no DuckDB type for the Arrow type halffloat"):
        duckdb_type(pa.float16())
    with pytest.raises(ValueError, match="no DuckDB type"):
        TableSpec("t", pa.schema([("x", pa.float16())]), ())
    with pytest.raises(ValueError, match=r"partition columns \['nope'\]"):
        TableSpec("t", pa.schema([("x", pa.float64())]), ("nope",))


def test_partition_outputs_hold_their_tables_columns_less_the_key():
    generation_columns = [n for n in GENERATIONS.column_names if n not in ("run_id", "model_key", "dagster_run_id")]
    assert sorted(GENERATION_SCHEMA.names) == sorted(generation_columns)
    assert GENERATION_SCHEMA.names[-3:] == ["batch_size", "image_count", "video_frames"]
    assert SCORE_SCHEMA.names == [n for n in REWARD_SCORES.column_names if n not in KEY]
    for schema, spec in ((GENERATION_SCHEMA, GENERATIONS), (SCORE_SCHEMA, REWARD_SCORES)):
        for field in schema:
            assert field.nullable, field.name  # DuckDB checks NOT NULL when the rows are inserted
            table_type = spec.schema.field(field.name).type
            assert field.type == (pa.string() if isinstance(table_type, pa.JsonType) else table_type), field.name


def field_names(record_type: type) -> list[str]:
    return [field.name for field in dataclasses.fields(record_type)]


def test_typed_records_have_their_tables_columns_in_order():
    assert [f.name for f in BENCHMARK_KEY] + field_names(SummaryRow) == list(BENCHMARK_SUMMARY.column_names)
    assert field_names(TrainingRunRecord) == list(TRAINING_RUNS.column_names)
    assert ["run_id"] + field_names(StepStats) == list(TRAINING_STEPS.column_names)


def summary(**changes) -> SummaryRow:
    row = SummaryRow(
        dataset="easy_vqa", model_source="/models/tiny", device="cpu", samples=96, wall_s=12.25,
        samples_per_s=96 / 12.25,
        generated_tokens_per_s=0.1 + 0.2, latency_avg_ms=1e-300, latency_p50_ms=5e-324, latency_p95_ms=1e300,
        model_load_s=0.5, pass_rate=1 / 3, manual_pass_rate=None, manual_false_passes=2, average_reward=-0.21,
        verifier_avg=-0.5, grounding_avg=0.0, format_avg=-0.3, cost_avg=0.875, anls_avg=None,
        relaxed_accuracy_avg=None, verifier_metric_agreement=0.75, accuracy=0.625, peak_memory_mb=512.123456789,
        gpu_seen=True,
        gpu_util_avg=60.0, gpu_util_max=None, gpu_memory_avg_mb=2000.0, gpu_memory_max_mb=3000.0,
        gpu_power_avg_w=150.5, cpu_percent_avg=100.0, rss_max_mb=600.0,
        created_at=datetime(2026, 3, 4, 2, 30, 1, 123456, tzinfo=UTC),
    )
    return dataclasses.replace(row, **changes)


def test_a_summary_row_lands_in_duckdb_with_exactly_its_values(tmp_path: Path):
    row = summary()
    with duckdb.connect(str(tmp_path / "report.duckdb")) as conn:
        ensure_tables(conn)
        assert replace_partition(conn, BENCHMARK_SUMMARY, KEY, BENCHMARK_SUMMARY.rows([row], **KEY)) == 1
        cursor = conn.execute("SELECT * FROM benchmark_summary")
        stored = dict(zip([d[0] for d in cursor.description], cursor.fetchone(), strict=True))
    assert stored == KEY | dataclasses.asdict(row)
    assert all(type(stored[name]) is type(value) for name, value in dataclasses.asdict(row).items())


def test_a_training_run_record_lands_in_duckdb_with_exactly_its_values():
    record = TrainingRunRecord(
        run_id="rl-grpo-s0", base_model="/models/tiny", env="easy_vqa", algorithm="grpo", quant_bits=4,
        reference_quantization_mode="nf4", reference_source="data/checkpoints/rl/warmup", reference_loaded=True,
        final_checkpoint="data/checkpoints/rl/step-40", steps=40, resumed_from_step=0,
        swap_question_type="colour", swap_questions=64, swap_changed=0.78125,
        config=json.dumps({"training": {"steps": 40}, "aerorl": {"kl_coef": 0.04}}),
        started_at=datetime(2026, 3, 4, 2, 0, tzinfo=UTC),
        finished_at=datetime(2026, 3, 4, 2, 9, 59, 999999, tzinfo=UTC),
        telemetry=json.dumps({"gpu_seen": False, "rss_max_mb": 812.5}), rejected_rows=2,
        reference_unquantized=json.dumps(["model.multi_modal_projector.linear_1", "lm_head"]),
        state_bytes_per_rank=7_444_712,
    )
    with duckdb.connect(":memory:") as conn:
        ensure_tables(conn, TRAINING_TABLES)
        replace_partition(conn, TRAINING_RUNS, {"run_id": record.run_id}, TRAINING_RUNS.rows([record]))
        cursor = conn.execute("SELECT *, typeof(config), config->>'$.aerorl.kl_coef' FROM training_runs")
        *stored, config_type, kl_coef = cursor.fetchone()
    assert tuple(stored) == dataclasses.astuple(record)
    assert (config_type, kl_coef) == ("JSON", "0.04")


def test_rows_refuse_a_record_that_does_not_fill_the_table():
    with pytest.raises(ValueError, match=r"benchmark_summary: a SummaryRow .* lacks \['batch_size'\]"):
        BENCHMARK_SUMMARY.rows([summary()], run_id="r1", model_key="tiny")
    with pytest.raises(ValueError, match=r"has unknown \['extra'\]"):
        BENCHMARK_SUMMARY.rows([summary()], extra=1, **KEY)


def test_an_older_training_runs_table_keeps_its_rows_under_the_renamed_column(tmp_path):
    """A report database made before ``quant_ref_bits`` became ``quant_bits``: the column is renamed
    in place (its value kept) and the columns added since are appended, NULL for the old row."""
    with duckdb.connect(str(tmp_path / "old.duckdb")) as conn:
        conn.execute("CREATE TABLE training_runs (run_id VARCHAR NOT NULL, base_model VARCHAR, env VARCHAR, "
                     "algorithm VARCHAR, quant_ref_bits INTEGER)")
        conn.execute("INSERT INTO training_runs VALUES ('old-run', '/m', 'easy_vqa', 'grpo', 4)")
        ensure_tables(conn, [TRAINING_RUNS])
        ensure_tables(conn, [TRAINING_RUNS])  # a second start finds nothing to change
        names = [name for name, *_ in conn.execute("DESCRIBE training_runs").fetchall()]
        stored = conn.execute("SELECT run_id, quant_bits, rejected_rows FROM training_runs").fetchall()
    assert names == list(TRAINING_RUNS.column_names)
    assert stored == [("old-run", 4, None)]


def test_an_older_reward_scores_table_gains_cell_accuracy_last_and_null_for_its_rows():
    """A report database made before ARC: ``cell_accuracy`` is appended after ``judge``, its old rows NULL."""
    before = [field for field in REWARD_SCORES.schema if field.name != "cell_accuracy"]
    older = TableSpec("reward_scores", pa.schema(before), REWARD_SCORES.partition_columns)
    with duckdb.connect(":memory:") as conn:
        ensure_tables(conn, [older])
        conn.execute("INSERT INTO reward_scores (run_id, model_key, batch_size, sample_id, judge) "
                     "VALUES ('r0', 'tiny', 4, 's0', 0.5)")
        ensure_tables(conn, [REWARD_SCORES])
        assert described(conn, "reward_scores") == TABLES["reward_scores"]
        assert conn.execute("SELECT sample_id, judge, cell_accuracy FROM reward_scores").fetchall() == [
            ("s0", 0.5, None)]
