"""DuckDB tables the pipeline writes, each declared once, as an Arrow schema: the benchmark's here,
training's in ``storage.training_schema`` and evaluation's in ``storage.eval_schema``.

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
    one partition (a write replaces the rows matching them). ``renamed`` maps a column's earlier
    name to its name here: ``ensure_tables`` renames it in a table made by an older version."""

    name: str
    schema: pa.Schema
    partition_columns: tuple[str, ...]
    renamed: tuple[tuple[str, str], ...] = ()

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


def required(name: str, data_type: pa.DataType) -> pa.Field:
    """A column that is ``NOT NULL``."""
    return pa.field(name, data_type, nullable=False)


BENCHMARK_KEY = (required("run_id", pa.string()), required("model_key", pa.string()),
                 required("batch_size", pa.int32()))
"""The columns that name one benchmark partition's rows: its run, model and batch size."""
_BENCHMARK_KEY_COLUMNS = tuple(f.name for f in BENCHMARK_KEY)
TIMESTAMP = pa.timestamp("us", tz="UTC")

RUNS = TableSpec(
    "runs",
    pa.schema([
        required("run_id", pa.string()),
        required("kind", pa.string()),
        ("started_at", TIMESTAMP),
        ("finished_at", TIMESTAMP),
        ("git_sha", pa.string()),
        ("config", pa.json_()),
        ("seeds", pa.json_()),
        ("library_versions", pa.json_()),
        ("input_hashes", pa.json_()),
    ]),
    ("run_id",),
)

GENERATION_FIELDS = (
    required("sample_id", pa.string()),
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
"""One generated sample (``aerorl_ops.generation.generations_table.GENERATION_SCHEMA`` adds its batch size)."""

GENERATIONS = TableSpec(
    "generations",
    pa.schema([*BENCHMARK_KEY, *GENERATION_FIELDS, pa.field("dagster_run_id", pa.string())]),
    _BENCHMARK_KEY_COLUMNS,
)

SCORE_FIELDS = (
    required("sample_id", pa.string()),
    pa.field("dataset", pa.string()),
    *[pa.field(name, pa.float64()) for name in REWARD_COMPONENT_NAMES],
    pa.field("total_reward", pa.float64()),
    pa.field("passed", pa.bool_()),
    pa.field("manual_pass", pa.bool_()),
    pa.field("anls", pa.float64()),
    pa.field("relaxed_accuracy", pa.float64()),
    pa.field("correct", pa.bool_()),
    pa.field("reward_config", pa.json_()),
    pa.field("judge", pa.float64()),
)
"""One scored sample (``aerorl_ops.scoring.partition_scores.SCORE_SCHEMA``). ``judge`` is the judge
reward's score (``rewards.judge_table``), NULL when no judge is configured; added last, so a table
made before it gains it through ``ensure_tables`` in the same place."""

REWARD_SCORES = TableSpec("reward_scores", pa.schema([*BENCHMARK_KEY, *SCORE_FIELDS]), _BENCHMARK_KEY_COLUMNS)

SUMMARY_FIELDS = (
    required("dataset", pa.string()),
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
    pa.field("created_at", TIMESTAMP),
)
"""One dataset's summary within a partition (``aerorl_ops.reporting.partition_summary.SummaryRow``): one row
per run x model x batch size x dataset; a write replaces every dataset's row of its partition."""

BENCHMARK_SUMMARY = TableSpec("benchmark_summary", pa.schema([*BENCHMARK_KEY, *SUMMARY_FIELDS]),
                              _BENCHMARK_KEY_COLUMNS)

REJECTED_ROWS = TableSpec(
    "rejected_rows",
    pa.schema([
        required("run_id", pa.string()),
        required("stage", pa.string()),
        ("dataset", pa.string()),
        ("locator", pa.string()),
        ("sample_id", pa.string()),
        required("reason", pa.string()),
    ]),
    ("run_id", "stage", "dataset"),
)

BENCHMARK_TABLES = (RUNS, GENERATIONS, REWARD_SCORES, BENCHMARK_SUMMARY, REJECTED_ROWS)
