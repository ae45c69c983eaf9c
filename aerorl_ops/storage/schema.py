"""DuckDB tables the pipeline writes, each declared once, as an Arrow schema.

A table's DDL (``TableSpec.ddl``) and the Arrow schemas of the partition outputs that feed it
(``output_schema``) derive from the schema here. Arrow types map onto DuckDB types as follows;
a field that is not nullable is ``NOT NULL``:

======================  ============
Arrow                   DuckDB
======================  ============
string                  VARCHAR
int32 / int64           INTEGER / BIGINT
float64                 DOUBLE
bool                    BOOLEAN
timestamp[us, tz=UTC]   TIMESTAMPTZ
arrow.json (pa.json_)   JSON
list<T>                 T[]
======================  ============
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from aerorl_ops.config.rewards import REWARD_COMPONENT_NAMES

_DUCKDB_TYPES: Mapping[pa.DataType, str] = {
    pa.string(): "VARCHAR",
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.float64(): "DOUBLE",
    pa.bool_(): "BOOLEAN",
    pa.timestamp("us", tz="UTC"): "TIMESTAMPTZ",
}


def duckdb_type(data_type: pa.DataType) -> str:
    """The DuckDB column type of an Arrow type (see the module table).

    >>> duckdb_type(pa.list_(pa.string())), duckdb_type(pa.json_()), duckdb_type(pa.timestamp("us", tz="UTC"))
    ('VARCHAR[]', 'JSON', 'TIMESTAMPTZ')
    """
    if isinstance(data_type, pa.JsonType):
        return "JSON"
    if pa.types.is_list(data_type):
        return f"{duckdb_type(data_type.value_type)}[]"
    try:
        return _DUCKDB_TYPES[data_type]
    except KeyError:
        raise ValueError(f"no DuckDB type for the Arrow type {data_type}; "
                         "add it to aerorl_ops.storage.schema._DUCKDB_TYPES") from None


def _storage_type(data_type: pa.DataType) -> pa.DataType:
    """JSON as the string it is stored in; lists of JSON likewise; other types as they are."""
    if isinstance(data_type, pa.JsonType):
        return data_type.storage_type
    if pa.types.is_list(data_type):
        return pa.list_(_storage_type(data_type.value_type))
    return data_type


def output_schema(fields: Iterable[pa.Field]) -> pa.Schema:
    """The Arrow schema of a partition output (cached Parquet) holding ``fields``.

    Every field is nullable and JSON is plain string: an output keeps what it was given, and
    DuckDB checks ``NOT NULL`` and JSON when the rows are inserted.
    """
    return pa.schema([pa.field(f.name, _storage_type(f.type)) for f in fields])


@dataclass(frozen=True)
class TableSpec:
    """One DuckDB table: its name, its columns as an Arrow schema, and the columns that name
    one partition (a write replaces the rows matching them)."""

    name: str
    schema: pa.Schema
    partition_columns: tuple[str, ...]

    def __post_init__(self) -> None:
        unknown = [c for c in self.partition_columns if c not in self.schema.names]
        if unknown:
            raise ValueError(f"table {self.name}: partition columns {unknown} are not among its columns")
        for field in self.schema:  # every type maps onto DuckDB, or this raises now, not at the first write
            duckdb_type(field.type)

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(self.schema.names)

    @property
    def columns(self) -> tuple[tuple[str, str], ...]:
        """(name, DuckDB type) per column, with ``NOT NULL`` where the field is not nullable."""
        return tuple((f.name, duckdb_type(f.type) + ("" if f.nullable else " NOT NULL")) for f in self.schema)

    def ddl(self) -> str:
        body = ",\n  ".join(f"{name} {sql_type}" for name, sql_type in self.columns)
        return f"CREATE TABLE IF NOT EXISTS {self.name} (\n  {body}\n)"

    def rows(self, records: Sequence[object], **columns: object) -> pa.Table:
        """Dataclass ``records`` as rows of this table, typed by its schema.

        ``columns`` are values shared by every row (a partition key); with each record's fields
        they must name exactly the table's columns.
        """
        rows = []
        for record in records:
            row = dict(columns)
            row.update((f.name, getattr(record, f.name)) for f in dataclasses.fields(record))
            if row.keys() != set(self.column_names):
                missing = sorted(set(self.column_names) - row.keys())
                extra = sorted(row.keys() - set(self.column_names))
                raise ValueError(f"table {self.name}: a {type(record).__name__} with columns {sorted(columns)} "
                                 f"lacks {missing} and has unknown {extra}")
            rows.append(row)
        return pa.Table.from_pylist(rows, schema=self.schema)


def _required(name: str, data_type: pa.DataType) -> pa.Field:
    return pa.field(name, data_type, nullable=False)


BENCHMARK_KEY = (_required("run_id", pa.string()), _required("model_key", pa.string()),
                 _required("batch_size", pa.int32()))
"""The columns that name one benchmark partition's rows: its run, model and batch size."""
_BENCHMARK_KEY_COLUMNS = tuple(f.name for f in BENCHMARK_KEY)
_TIMESTAMP = pa.timestamp("us", tz="UTC")

RUNS = TableSpec(
    "runs",
    pa.schema([
        _required("run_id", pa.string()),
        _required("kind", pa.string()),
        ("started_at", _TIMESTAMP),
        ("finished_at", _TIMESTAMP),
        ("git_sha", pa.string()),
        ("config", pa.json_()),
        ("seeds", pa.json_()),
        ("library_versions", pa.json_()),
        ("input_hashes", pa.json_()),
    ]),
    ("run_id",),
)

GENERATION_FIELDS = (
    _required("sample_id", pa.string()),
    pa.field("dataset", pa.string()),
    pa.field("prompt", pa.string()),
    pa.field("response", pa.string()),
    pa.field("raw_response", pa.string()),
    pa.field("reference", pa.list_(pa.string())),
    pa.field("evidence_entities", pa.list_(pa.string())),
    pa.field("claimed_entities", pa.list_(pa.string())),
    pa.field("latency_ms", pa.float64()),
    pa.field("batch_latency_ms", pa.float64()),
    pa.field("generated_tokens", pa.int32()),
    pa.field("prompt_text_tokens", pa.int32()),
    pa.field("vision_tokens", pa.int32()),
    pa.field("batch_index", pa.int32()),
)
"""One generated sample (``aerorl_ops.generation.records.GENERATION_SCHEMA`` adds its batch size)."""

GENERATIONS = TableSpec(
    "generations",
    pa.schema([*BENCHMARK_KEY, *GENERATION_FIELDS, pa.field("dagster_run_id", pa.string())]),
    _BENCHMARK_KEY_COLUMNS,
)

SCORE_FIELDS = (
    _required("sample_id", pa.string()),
    pa.field("dataset", pa.string()),
    *[pa.field(name, pa.float64()) for name in REWARD_COMPONENT_NAMES],
    pa.field("total_reward", pa.float64()),
    pa.field("passed", pa.bool_()),
    pa.field("manual_pass", pa.bool_()),
    pa.field("anls", pa.float64()),
    pa.field("relaxed_accuracy", pa.float64()),
    pa.field("correct", pa.bool_()),
    pa.field("reward_config", pa.json_()),
)
"""One scored sample (``aerorl_ops.scoring.partition_scores.SCORE_SCHEMA``)."""

REWARD_SCORES = TableSpec("reward_scores", pa.schema([*BENCHMARK_KEY, *SCORE_FIELDS]), _BENCHMARK_KEY_COLUMNS)

SUMMARY_FIELDS = (
    _required("dataset", pa.string()),
    pa.field("model_source", pa.string()),
    pa.field("device", pa.string()),
    pa.field("samples", pa.int32()),
    pa.field("wall_s", pa.float64()),
    pa.field("samples_per_s", pa.float64()),
    pa.field("generated_tokens_per_s", pa.float64()),
    pa.field("latency_avg_ms", pa.float64()),
    pa.field("latency_p50_ms", pa.float64()),
    pa.field("latency_p95_ms", pa.float64()),
    pa.field("model_load_s", pa.float64()),
    pa.field("pass_rate", pa.float64()),
    pa.field("manual_pass_rate", pa.float64()),
    pa.field("manual_false_passes", pa.int32()),
    pa.field("average_reward", pa.float64()),
    *[pa.field(f"{name}_avg", pa.float64()) for name in REWARD_COMPONENT_NAMES],
    pa.field("anls_avg", pa.float64()),
    pa.field("relaxed_accuracy_avg", pa.float64()),
    pa.field("verifier_metric_agreement", pa.float64()),
    pa.field("accuracy", pa.float64()),
    pa.field("peak_memory_mb", pa.float64()),
    pa.field("gpu_seen", pa.bool_()),
    pa.field("gpu_util_avg", pa.float64()),
    pa.field("gpu_util_max", pa.float64()),
    pa.field("gpu_memory_avg_mb", pa.float64()),
    pa.field("gpu_memory_max_mb", pa.float64()),
    pa.field("gpu_power_avg_w", pa.float64()),
    pa.field("cpu_percent_avg", pa.float64()),
    pa.field("rss_max_mb", pa.float64()),
    pa.field("created_at", _TIMESTAMP),
)
"""One dataset's summary within a partition (``aerorl_ops.reporting.partition_summary.SummaryRow``): one row
per run x model x batch size x dataset; a write replaces every dataset's row of its partition."""

BENCHMARK_SUMMARY = TableSpec("benchmark_summary", pa.schema([*BENCHMARK_KEY, *SUMMARY_FIELDS]),
                              _BENCHMARK_KEY_COLUMNS)

REJECTED_ROWS = TableSpec(
    "rejected_rows",
    pa.schema([
        _required("run_id", pa.string()),
        _required("stage", pa.string()),
        ("dataset", pa.string()),
        ("locator", pa.string()),
        ("sample_id", pa.string()),
        _required("reason", pa.string()),
    ]),
    ("run_id", "stage", "dataset"),
)

BENCHMARK_TABLES = (RUNS, GENERATIONS, REWARD_SCORES, BENCHMARK_SUMMARY, REJECTED_ROWS)

TRAINING_RUNS = TableSpec(
    "training_runs",
    pa.schema([
        _required("run_id", pa.string()),
        ("base_model", pa.string()),
        ("env", pa.string()),
        ("algorithm", pa.string()),
        ("quant_ref_bits", pa.int32()),
        ("reference_quantization_mode", pa.string()),
        ("reference_source", pa.string()),
        ("reference_loaded", pa.bool_()),
        ("final_checkpoint", pa.string()),
        ("steps", pa.int32()),
        ("resumed_from_step", pa.int32()),
        ("swap_question_type", pa.string()),
        ("swap_questions", pa.int32()),
        ("swap_changed", pa.float64()),
        ("config", pa.json_()),
        ("started_at", _TIMESTAMP),
        ("finished_at", _TIMESTAMP),
        ("telemetry", pa.json_()),
    ]),
    ("run_id",),
)
"""One training run (``aerorl_ops.rl.training_record.TrainingRunRecord``); ``swap_changed`` is the
share of the final model's ``swap_question_type`` answers that change when the images are swapped."""

TRAINING_STEPS = TableSpec(
    "training_steps",
    pa.schema([
        _required("run_id", pa.string()),
        _required("step", pa.int32()),
        ("phase", pa.string()),
        *[(name, pa.float64()) for name in (
            "loss", "reward_mean", "reward_std", "accuracy", "kl", "entropy", "clip_fraction", "response_clip_ratio",
            "response_length", "masked_token_fraction", "vision_token_fraction", "tokens_per_s", "step_s",
            "grad_norm", "learning_rate")],
        ("skipped", pa.bool_()),
        ("peak_memory_mb", pa.float64()),
        ("curriculum_stage", pa.int32()),
        ("episodes_seen", pa.int64()),
        *[(name, pa.float64()) for name in (
            "approx_kl", "dual_clip_fraction", "value_loss", "value_clip_fraction", "explained_variance")],
    ]),
    ("run_id",),
)
"""One training step: the run id, then the fields of ``aerorl_ops.rl.stats.StepStats``."""

TRAINING_EVALS = TableSpec(
    "training_evals",
    pa.schema([
        _required("run_id", pa.string()),
        _required("step", pa.int32()),
        ("phase", pa.string()),
        ("wall_s", pa.float64()),
        ("accuracy", pa.float64()),
        ("accuracy_stderr", pa.float64()),
        ("n", pa.int32()),
        *[(name, pa.float64()) for name in ("reward_mean", *[f"{c}_mean" for c in REWARD_COMPONENT_NAMES])],
        ("samples", pa.int32()),
    ]),
    ("run_id",),
)
"""One held-out evaluation (phases: no_image_prior, base, warmup, rl, final, control): greedy accuracy
over ``n`` questions with its binomial standard error, and the mean reward (and reward-stack
components, where the environment's reward has them)."""

TRAINING_EVAL_TYPES = TableSpec(
    "training_eval_types",
    pa.schema([
        _required("run_id", pa.string()),
        _required("step", pa.int32()),
        _required("phase", pa.string()),
        _required("question_type", pa.string()),
        ("accuracy", pa.float64()),
        ("n", pa.int32()),
    ]),
    ("run_id",),
)
"""The accuracy of one held-out evaluation on one question type (e.g. easy-VQA yes_no / colour / shape)."""

TRAINING_TABLES = (TRAINING_RUNS, TRAINING_STEPS, TRAINING_EVALS, TRAINING_EVAL_TYPES)

MODEL_ROLE, BASELINE_ROLE = "model", "baseline"
"""The ``role`` of a model within an eval: the one evaluated, and the one it is compared with."""

EVAL_RUNS = TableSpec(
    "eval_runs",
    pa.schema([
        _required("eval_id", pa.string()),
        _required("role", pa.string()),
        _required("model", pa.string()),
        ("model_source", pa.string()),
        ("dataset", pa.string()),
        ("split", pa.string()),
        ("questions", pa.int32()),
        ("settings", pa.json_()),
        ("max_new_tokens", pa.int32()),
        ("seed", pa.int64()),
        ("training_run_id", pa.string()),
        ("step", pa.int32()),
        ("device", pa.string()),
        ("started_at", _TIMESTAMP),
        ("finished_at", _TIMESTAMP),
        ("wall_s", pa.float64()),
        ("config", pa.json_()),
    ]),
    ("eval_id",),
)
"""One model's evaluation within an eval (``aerorl_ops.evaluator.records.EvalRunRecord``): ``role`` is
'model' or 'baseline' (an eval of a model alone has only 'model'); ``model`` is the key or checkpoint
directory as given; ``settings`` the sampling settings as JSON; ``training_run_id`` and ``step`` are set
when training recorded the evaluation."""

EVAL_SAMPLES = TableSpec(
    "eval_samples",
    pa.schema([
        _required("eval_id", pa.string()),
        _required("role", pa.string()),
        _required("setting", pa.string()),
        _required("item_index", pa.int32()),
        ("item_id", pa.string()),
        ("question_type", pa.string()),
        _required("sample_no", pa.int32()),
        ("response", pa.string()),
        ("correct", pa.bool_()),
        ("reward", pa.float64()),
        ("response_tokens", pa.int32()),
        ("truncated", pa.bool_()),
        ("reflection", pa.bool_()),
    ]),
    ("eval_id",),
)
"""One response (``aerorl_ops.evaluator.runner.SampleRecord``): question ``item_index`` of the dataset
sample, response ``sample_no`` at ``setting``; its length in tokens (EOS excluded), whether it was cut at
the maximum length, and whether it holds one of MAYE's reflection words."""

EVAL_METRICS = TableSpec(
    "eval_metrics",
    pa.schema([
        _required("eval_id", pa.string()),
        _required("role", pa.string()),
        _required("setting", pa.string()),
        _required("question_type", pa.string()),
        *[(name, pa.int32()) for name in ("k", "samples_per_question", "questions", "responses")],
        *[(name, pa.float64()) for name in ("accuracy", "accuracy_stderr", "pass_at_1", "reward_mean", "mean_length",
                                            "length_clip_ratio")],
        ("n_correct", pa.int32()),
        ("n_reflection", pa.int32()),
        *[(name, pa.float64()) for name in ("reflection_ratio", "reflection_ratio_in_correct",
                                            "reflection_ratio_in_incorrect", "correct_ratio_in_reflection",
                                            "correct_ratio_in_no_reflection")],
    ]),
    ("eval_id",),
)
"""One model's metrics at one setting (``aerorl_ops.evaluator.summaries.SettingMetrics``), wide: over every
question (``question_type`` = 'all') and per question type. ``accuracy`` is the mean unbiased pass@k;
a reflection ratio with a zero denominator is NULL."""

EVAL_COMPARISONS = TableSpec(
    "eval_comparisons",
    pa.schema([
        _required("eval_id", pa.string()),
        _required("setting", pa.string()),
        _required("question_type", pa.string()),
        _required("method", pa.string()),
        ("questions", pa.int32()),
        *[(name, pa.float64()) for name in ("model_accuracy", "baseline_accuracy", "difference", "ci_low", "ci_high",
                                            "confidence")],
        ("b", pa.int32()),
        ("c", pa.int32()),
        ("p_value", pa.float64()),
        ("resamples", pa.int32()),
    ]),
    ("eval_id",),
)
"""Model minus baseline at one setting and question type (``aerorl_ops.evaluator.compare.ComparisonRow``):
the paired ``confidence`` interval of the accuracy difference, exact McNemar (with ``p_value``) where a
setting draws one response per question, else the paired bootstrap (``resamples``)."""

EVAL_TABLES = (EVAL_RUNS, EVAL_SAMPLES, EVAL_METRICS, EVAL_COMPARISONS)
