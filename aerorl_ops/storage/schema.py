"""DuckDB tables the pipeline writes. One place defines every column."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TableSpec:
    name: str
    columns: tuple[tuple[str, str], ...]
    partition_columns: tuple[str, ...]

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)

    def ddl(self) -> str:
        body = ",\n  ".join(f"{name} {sql_type}" for name, sql_type in self.columns)
        return f"CREATE TABLE IF NOT EXISTS {self.name} (\n  {body}\n)"


_PARTITION = (("run_id", "VARCHAR NOT NULL"), ("model_key", "VARCHAR NOT NULL"), ("batch_size", "INTEGER NOT NULL"))
_PARTITION_KEYS = ("run_id", "model_key", "batch_size")

RUNS = TableSpec(
    "runs",
    (
        ("run_id", "VARCHAR NOT NULL"),
        ("kind", "VARCHAR NOT NULL"),
        ("started_at", "TIMESTAMPTZ"),
        ("finished_at", "TIMESTAMPTZ"),
        ("git_sha", "VARCHAR"),
        ("config", "JSON"),
        ("seeds", "JSON"),
        ("library_versions", "JSON"),
        ("input_hashes", "JSON"),
    ),
    ("run_id",),
)

GENERATIONS = TableSpec(
    "generations",
    _PARTITION + (
        ("sample_id", "VARCHAR NOT NULL"),
        ("dataset", "VARCHAR"),
        ("prompt", "VARCHAR"),
        ("response", "VARCHAR"),
        ("raw_response", "VARCHAR"),
        ("reference", "VARCHAR[]"),
        ("evidence_entities", "VARCHAR[]"),
        ("claimed_entities", "VARCHAR[]"),
        ("latency_ms", "DOUBLE"),
        ("batch_latency_ms", "DOUBLE"),
        ("generated_tokens", "INTEGER"),
        ("prompt_text_tokens", "INTEGER"),
        ("vision_tokens", "INTEGER"),
        ("batch_index", "INTEGER"),
        ("dagster_run_id", "VARCHAR"),
    ),
    _PARTITION_KEYS,
)

REWARD_SCORES = TableSpec(
    "reward_scores",
    _PARTITION + (
        ("sample_id", "VARCHAR NOT NULL"),
        ("dataset", "VARCHAR"),
        ("verifier", "DOUBLE"),
        ("grounding", "DOUBLE"),
        ("format", "DOUBLE"),
        ("cost", "DOUBLE"),
        ("total_reward", "DOUBLE"),
        ("passed", "BOOLEAN"),
        ("manual_pass", "BOOLEAN"),
        ("anls", "DOUBLE"),
        ("relaxed_accuracy", "DOUBLE"),
        ("reward_config", "JSON"),
    ),
    _PARTITION_KEYS,
)

BENCHMARK_SUMMARY = TableSpec(
    "benchmark_summary",
    _PARTITION + (
        ("model_source", "VARCHAR"),
        ("device", "VARCHAR"),
        ("samples", "INTEGER"),
        ("wall_s", "DOUBLE"),
        ("samples_per_s", "DOUBLE"),
        ("generated_tokens_per_s", "DOUBLE"),
        ("latency_avg_ms", "DOUBLE"),
        ("latency_p50_ms", "DOUBLE"),
        ("latency_p95_ms", "DOUBLE"),
        ("model_load_s", "DOUBLE"),
        ("pass_rate", "DOUBLE"),
        ("manual_pass_rate", "DOUBLE"),
        ("manual_false_passes", "INTEGER"),
        ("average_reward", "DOUBLE"),
        ("verifier_avg", "DOUBLE"),
        ("grounding_avg", "DOUBLE"),
        ("format_avg", "DOUBLE"),
        ("cost_avg", "DOUBLE"),
        ("anls_avg", "DOUBLE"),
        ("relaxed_accuracy_avg", "DOUBLE"),
        ("verifier_metric_agreement", "DOUBLE"),
        ("peak_memory_mb", "DOUBLE"),
        ("gpu_seen", "BOOLEAN"),
        ("gpu_util_avg", "DOUBLE"),
        ("gpu_util_max", "DOUBLE"),
        ("gpu_memory_avg_mb", "DOUBLE"),
        ("gpu_memory_max_mb", "DOUBLE"),
        ("gpu_power_avg_w", "DOUBLE"),
        ("cpu_percent_avg", "DOUBLE"),
        ("rss_max_mb", "DOUBLE"),
        ("created_at", "TIMESTAMPTZ"),
    ),
    _PARTITION_KEYS,
)

REJECTED_ROWS = TableSpec(
    "rejected_rows",
    (
        ("run_id", "VARCHAR NOT NULL"),
        ("stage", "VARCHAR NOT NULL"),
        ("dataset", "VARCHAR"),
        ("locator", "VARCHAR"),
        ("sample_id", "VARCHAR"),
        ("reason", "VARCHAR NOT NULL"),
    ),
    ("run_id", "stage", "dataset"),
)

BENCHMARK_TABLES = (RUNS, GENERATIONS, REWARD_SCORES, BENCHMARK_SUMMARY, REJECTED_ROWS)

TRAINING_RUNS = TableSpec(
    "training_runs",
    (
        ("run_id", "VARCHAR NOT NULL"),
        ("base_model", "VARCHAR"),
        ("algorithm", "VARCHAR"),
        ("quant_ref_bits", "INTEGER"),
        ("reference_quantization_mode", "VARCHAR"),
        ("reference_source", "VARCHAR"),
        ("final_checkpoint", "VARCHAR"),
        ("steps", "INTEGER"),
        ("resumed_from_step", "INTEGER"),
        ("config", "JSON"),
        ("started_at", "TIMESTAMPTZ"),
        ("finished_at", "TIMESTAMPTZ"),
        ("telemetry", "JSON"),
    ),
    ("run_id",),
)

TRAINING_STEPS = TableSpec(
    "training_steps",
    (
        ("run_id", "VARCHAR NOT NULL"),
        ("step", "INTEGER NOT NULL"),
        ("phase", "VARCHAR"),
        ("loss", "DOUBLE"),
        ("reward_mean", "DOUBLE"),
        ("reward_std", "DOUBLE"),
        ("verifier_mean", "DOUBLE"),
        ("verifier_std", "DOUBLE"),
        ("grounding_mean", "DOUBLE"),
        ("grounding_std", "DOUBLE"),
        ("format_mean", "DOUBLE"),
        ("format_std", "DOUBLE"),
        ("cost_mean", "DOUBLE"),
        ("cost_std", "DOUBLE"),
        ("kl", "DOUBLE"),
        ("entropy", "DOUBLE"),
        ("clip_fraction", "DOUBLE"),
        ("response_length", "DOUBLE"),
        ("masked_token_fraction", "DOUBLE"),
        ("vision_token_fraction", "DOUBLE"),
        ("tokens_per_s", "DOUBLE"),
        ("step_s", "DOUBLE"),
        ("grad_norm", "DOUBLE"),
        ("peak_memory_mb", "DOUBLE"),
    ),
    ("run_id",),
)

TRAINING_EVALS = TableSpec(
    "training_evals",
    (
        ("run_id", "VARCHAR NOT NULL"),
        ("step", "INTEGER NOT NULL"),
        ("phase", "VARCHAR"),
        ("reward_mean", "DOUBLE"),
        ("verifier_mean", "DOUBLE"),
        ("grounding_mean", "DOUBLE"),
        ("format_mean", "DOUBLE"),
        ("cost_mean", "DOUBLE"),
        ("samples", "INTEGER"),
    ),
    ("run_id",),
)

TRAINING_TABLES = (TRAINING_RUNS, TRAINING_STEPS, TRAINING_EVALS)
