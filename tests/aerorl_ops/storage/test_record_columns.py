"""A stored row's shape is written once, as a dataclass, and its table's columns derive from it
(``storage.columns``): the derived tables keep exactly the columns they had when they were written out by
hand, and a field whose column cannot be derived is refused where the table is declared."""

from __future__ import annotations

import doctest
from dataclasses import dataclass
from datetime import UTC, datetime

import duckdb
import pyarrow as pa
import pytest

from aerorl_ops.storage import columns
from aerorl_ops.storage.checkpoint_schema import CHECKPOINT_EVALS, CHECKPOINTS
from aerorl_ops.storage.columns import column, record_columns
from aerorl_ops.storage.duckdb_store import ensure_tables
from aerorl_ops.storage.eval_schema import EVAL_COMPARISONS, EVAL_METRICS, EVAL_RUNS, EVAL_SAMPLES
from aerorl_ops.storage.schema import BENCHMARK_SUMMARY
from aerorl_ops.storage.training_schema import (
    TRAINING_EVAL_SOURCES,
    TRAINING_EVAL_TYPES,
    TRAINING_EVALS,
    TRAINING_ROLLOUTS,
    TRAINING_RUNS,
    TRAINING_STEPS,
    TrainingEvalRow,
)

JSON, TS = "extension<arrow.json>", "timestamp[us, tz=UTC]"

# The columns of each derived table as they were declared by hand before (name, Arrow type, "!" = NOT NULL).
# A change here changes every report database: it needs a migration, not just a new field.
HAND_WRITTEN = {
    "training_runs": (
        "run_id string !", "base_model string", "env string", "algorithm string", "quant_bits int32",
        "reference_quantization_mode string", "reference_source string", "reference_loaded bool",
        "final_checkpoint string", "steps int32", "resumed_from_step int32", "swap_question_type string",
        "swap_questions int32", "swap_changed double", f"config {JSON}", f"started_at {TS}", f"finished_at {TS}",
        f"telemetry {JSON}", "rejected_rows int32", f"reference_unquantized {JSON}", "state_bytes_per_rank int64",
    ),
    "training_steps": (
        "run_id string !", "step int32 !", "phase string", "loss double", "reward_mean double", "reward_std double",
        "accuracy double", "kl double", "entropy double", "clip_fraction double", "response_clip_ratio double",
        "response_length double", "masked_token_fraction double", "vision_token_fraction double",
        "tokens_per_s double", "step_s double", "grad_norm double", "learning_rate double", "skipped bool",
        "peak_memory_mb double", "curriculum_stage int32", "episodes_seen int64", "approx_kl double",
        "dual_clip_fraction double", "value_loss double", "value_clip_fraction double", "explained_variance double",
        "groups_sampled int32", "groups_kept int32", "groups_dropped int32", "groups_filled int32",
        "sampling_rounds int32", "padded_token_fraction double", "behaviour_step int32",
        f"accuracy_by_source {JSON}", "scoring_path string", "rollout_s double", "scoring_s double",
        "update_s double", "decode_path string",
    ),
    "training_evals": (
        "run_id string !", "step int32 !", "phase string", "wall_s double", "accuracy double",
        "accuracy_stderr double", "n int32", "reward_mean double", "verifier_mean double", "grounding_mean double",
        "format_mean double", "cost_mean double", "samples int32", "distribution string", "return_stderr double",
        "mean_turns double", "mean_turns_stderr double",
    ),
    "training_eval_types": (
        "run_id string !", "step int32 !", "phase string !", "question_type string !", "accuracy double", "n int32",
        "distribution string",
    ),
    "training_eval_sources": (
        "run_id string !", "step int32 !", "phase string !", "source string !", "accuracy double", "n int32",
        "distribution string",
    ),
    "training_rollouts": (
        "run_id string !", "step int32 !", "row int32 !", "prompt_id string", "question string",
        "image_sha256s list<item: string>", "completion string", "reward double", "correct bool", "advantage double",
        "length int32", "logprob_sum double",
    ),
    "checkpoints": (
        "run_id string !", "step int32 !", "checkpoint string", "ordinal int32", "final bool", "path string",
        "content_sha256 string", "base_model string", "held_out_accuracy double", "held_out_n int32",
        f"recorded_at {TS}",
    ),
    "checkpoint_evals": (
        "run_id string !", "step int32 !", "eval_id string !", "checkpoint string", "content_sha256 string",
        "base_model string", "dagster_run_id string", f"evaluated_at {TS}",
    ),
    "benchmark_summary": (
        "run_id string !", "model_key string !", "batch_size int32 !", "dataset string !", "model_source string",
        "device string", "samples int32", "wall_s double", "samples_per_s double", "generated_tokens_per_s double",
        "latency_avg_ms double", "latency_p50_ms double", "latency_p95_ms double", "model_load_s double",
        "pass_rate double", "manual_pass_rate double", "manual_false_passes int32", "average_reward double",
        "verifier_avg double", "grounding_avg double", "format_avg double", "cost_avg double", "anls_avg double",
        "relaxed_accuracy_avg double", "verifier_metric_agreement double", "accuracy double", "peak_memory_mb double",
        "gpu_seen bool", "gpu_util_avg double", "gpu_util_max double", "gpu_memory_avg_mb double",
        "gpu_memory_max_mb double", "gpu_power_avg_w double", "cpu_percent_avg double", "rss_max_mb double",
        f"created_at {TS}",
    ),
    "eval_runs": (
        "eval_id string !", "role string !", "model string !", "model_source string", "dataset string",
        "split string", "questions int32", f"settings {JSON}", "max_new_tokens int32", "seed int64",
        "training_run_id string", "step int32", "device string", f"started_at {TS}", f"finished_at {TS}",
        "wall_s double", f"config {JSON}", "rejected_rows int32", "cpu_s double",
    ),
    "eval_samples": (
        "eval_id string !", "role string !", "setting string !", "item_index int32 !", "item_id string",
        "question_type string", "sample_no int32 !", "response string", "correct bool", "reward double",
        "response_tokens int32", "truncated bool", "reflection bool", "source string", "turns int32",
        "distribution string",
    ),
    "eval_metrics": (
        "eval_id string !", "role string !", "setting string !", "question_type string !", "k int32",
        "samples_per_question int32", "questions int32", "responses int32", "accuracy double",
        "accuracy_stderr double", "pass_at_1 double", "reward_mean double", "mean_length double",
        "length_clip_ratio double", "n_correct int32", "n_reflection int32", "reflection_ratio double",
        "reflection_ratio_in_correct double", "reflection_ratio_in_incorrect double",
        "correct_ratio_in_reflection double", "correct_ratio_in_no_reflection double", "source string !",
        "mean_turns double", "distribution string",
    ),
    "eval_comparisons": (
        "eval_id string !", "setting string !", "question_type string !", "method string !", "questions int32",
        "model_accuracy double", "baseline_accuracy double", "difference double", "ci_low double", "ci_high double",
        "confidence double", "b int32", "c int32", "p_value double", "resamples int32", "source string !",
        "distribution string",
    ),
}
DERIVED = (TRAINING_RUNS, TRAINING_STEPS, TRAINING_EVALS, TRAINING_EVAL_TYPES, TRAINING_EVAL_SOURCES, TRAINING_ROLLOUTS,
           CHECKPOINTS, CHECKPOINT_EVALS, BENCHMARK_SUMMARY, EVAL_RUNS, EVAL_SAMPLES, EVAL_METRICS, EVAL_COMPARISONS)


def described(schema: pa.Schema) -> tuple[str, ...]:
    return tuple(f"{f.name} {f.type}" + ("" if f.nullable else " !") for f in schema)


@pytest.mark.parametrize("spec", DERIVED, ids=lambda spec: spec.name)
def test_a_derived_table_keeps_the_columns_it_was_declared_with(spec):
    assert described(spec.schema) == HAND_WRITTEN[spec.name]
    assert spec.schema.metadata is None


def test_partition_and_renamed_columns_are_kept():
    assert [(s.name, s.partition_columns, s.renamed) for s in DERIVED] == [
        ("training_runs", ("run_id",), (("quant_ref_bits", "quant_bits"),)),
        ("training_steps", ("run_id",), ()),
        ("training_evals", ("run_id",), ()),
        ("training_eval_types", ("run_id",), ()),
        ("training_eval_sources", ("run_id",), ()),
        ("training_rollouts", ("run_id", "step"), ()),
        ("checkpoints", ("run_id", "step"), ()),
        ("checkpoint_evals", ("run_id", "step", "eval_id"), ()),
        ("benchmark_summary", ("run_id", "model_key", "batch_size"), ()),
        ("eval_runs", ("eval_id",), ()),
        ("eval_samples", ("eval_id",), ()),
        ("eval_metrics", ("eval_id",), ()),
        ("eval_comparisons", ("eval_id",), ()),
    ]


@dataclass(frozen=True)
class Everything:
    key: str = column(required=True)
    count: int = column(required=True)
    share: float | None
    flag: bool
    at: datetime | None
    big: int | None = column(pa.int64(), default=None)
    blob: str | None = column(pa.json_(), default=None)
    note: str = "none"


def test_each_field_is_a_column_typed_by_its_annotation_in_field_order():
    assert described(pa.schema(record_columns(Everything))) == (
        "key string !", "count int32 !", "share double", "flag bool", f"at {TS}", "big int64", f"blob {JSON}",
        "note string")


def test_a_records_values_land_in_duckdb_under_its_derived_columns():
    row = Everything("k", 3, 0.25, True, datetime(2026, 3, 4, 2, 30, 1, 5, tzinfo=UTC), 2**40, '{"a": [1]}')
    spec_columns = pa.schema(record_columns(Everything))
    with duckdb.connect(":memory:") as conn:
        conn.register("given", pa.Table.from_pylist([vars(row)], schema=spec_columns))
        stored = conn.execute("SELECT *, typeof(blob), blob->>'$.a[0]' FROM given").fetchone()
    assert stored == ("k", 3, 0.25, True, row.at, 2**40, '{"a": [1]}', "none", "JSON", "1")


def test_a_field_whose_column_cannot_be_derived_is_refused_naming_it():
    @dataclass
    class Picture:
        data: bytes

    @dataclass
    class Either:
        value: int | str | None

    @dataclass
    class Contradiction:
        step: int | None = column(required=True)

    with pytest.raises(ValueError, match=r"Picture\.data: no Arrow type for the annotation bytes;"):
        record_columns(Picture)
    with pytest.raises(ValueError, match=r"Either\.value: a column holds one type \(or None\)"):
        record_columns(Either)
    with pytest.raises(ValueError, match=r"Contradiction\.step: a required \(NOT NULL\) column is annotated"):
        record_columns(Contradiction)


def test_the_eval_row_has_a_mean_per_reward_component():
    row = TrainingEvalRow(step=4, phase="rl", wall_s=1.5, accuracy=0.75, accuracy_stderr=0.25, n=4, reward_mean=0.5,
                          verifier_mean=1.0, grounding_mean=None, format_mean=0.0, cost_mean=-0.125, samples=4)
    with duckdb.connect(":memory:") as conn:
        ensure_tables(conn, [TRAINING_EVALS])
        conn.register("given", TRAINING_EVALS.rows([row], run_id="r"))
        conn.execute("INSERT INTO training_evals SELECT * FROM given")
        stored = conn.execute("SELECT * FROM training_evals").fetchall()
    assert stored == [("r", 4, "rl", 1.5, 0.75, 0.25, 4, 0.5, 1.0, None, 0.0, -0.125, 4, None, None, None, None)]


def test_the_module_examples_hold():
    assert doctest.testmod(columns).failed == 0
