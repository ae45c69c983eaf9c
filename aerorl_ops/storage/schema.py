"""DuckDB tables the pipeline writes, each declared once: the benchmark's here, as an Arrow schema or, for
``benchmark_summary``, as the dataclass of one row, whose columns ``storage.columns`` derives; training's
(``storage.training_schema``), evaluation's (``storage.eval_schema``) and the checkpoints'
(``storage.checkpoint_schema``) likewise as row dataclasses.

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
from dataclasses import dataclass, make_dataclass
from datetime import datetime

import pyarrow as pa

from aerorl_ops.config.rewards import REWARD_COMPONENT_NAMES
from aerorl_ops.storage.columns import TIMESTAMP, column, record_columns

_DUCKDB_TYPES: Mapping[pa.DataType, str] = {
    pa.string(): "VARCHAR",
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.float64(): "DOUBLE",
    pa.bool_(): "BOOLEAN",
    TIMESTAMP: "TIMESTAMPTZ",
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
"""One generated sample (``aerorl_ops.generation.generations_table.GENERATION_SCHEMA`` adds its batch size,
its image count and its video's frames)."""
IMAGE_COUNT = pa.field("image_count", pa.int32())
"""How many images the sample's prompt showed (``vision_tokens`` counts all of theirs). Added last, so a table
made before it gains it through ``ensure_tables`` in the same place; its earlier rows hold NULL."""
VIDEO_FRAMES = pa.field("video_frames", pa.int32())
"""How many frames of a video the sample's prompt showed (0: no video; ``vision_tokens`` counts theirs too), as a
video or as images as its model takes it. Added last, as ``image_count`` was; earlier rows hold NULL."""

GENERATIONS = TableSpec(
    "generations",
    pa.schema([*BENCHMARK_KEY, *GENERATION_FIELDS, pa.field("dagster_run_id", pa.string()), IMAGE_COUNT,
               VIDEO_FRAMES]),
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
    pa.field("cell_accuracy", pa.float64()),
)
"""One scored sample (``aerorl_ops.scoring.partition_scores.SCORE_SCHEMA``). ``judge`` is the judge
reward's score (``rewards.judge_table``), NULL when no judge is configured; ``cell_accuracy`` an ARC
row's share of grid cells answered right (``text.arc_grids``), NULL for any other kind. Each was added
last, so a table made before it gains it through ``ensure_tables`` in the same place."""

REWARD_SCORES = TableSpec("reward_scores", pa.schema([*BENCHMARK_KEY, *SCORE_FIELDS]), _BENCHMARK_KEY_COLUMNS)

SummaryRow = make_dataclass("SummaryRow", [
    ("dataset", str, column(required=True)),
    ("model_source", str),
    ("device", str),
    ("samples", int),
    ("wall_s", float),  # the dataset's share of the partition's generation time
    ("samples_per_s", float | None),
    ("generated_tokens_per_s", float | None),
    ("latency_avg_ms", float | None),
    ("latency_p50_ms", float | None),
    ("latency_p95_ms", float | None),
    ("model_load_s", float),
    ("pass_rate", float | None),
    ("manual_pass_rate", float | None),
    ("manual_false_passes", int),
    ("average_reward", float | None),
    *[(f"{name}_avg", float | None) for name in REWARD_COMPONENT_NAMES],
    ("anls_avg", float | None),
    ("relaxed_accuracy_avg", float | None),
    ("verifier_metric_agreement", float | None),
    ("accuracy", float | None),
    ("peak_memory_mb", float | None),
    ("gpu_seen", bool),
    ("gpu_util_avg", float | None),
    ("gpu_util_max", float | None),
    ("gpu_memory_avg_mb", float | None),
    ("gpu_memory_max_mb", float | None),
    ("gpu_power_avg_w", float | None),
    ("cpu_percent_avg", float | None),
    ("rss_max_mb", float | None),
    ("created_at", datetime),
], frozen=True, namespace={"__module__": __name__, "__doc__": """One dataset's summary within a benchmark
partition: its ``benchmark_summary`` row less the partition key (run, model, batch size), one row per run x
model x batch size x dataset; a write replaces every dataset's row of its partition
(``aerorl_ops.reporting.partition_summary`` computes it). The average of each reward component is
``<component>_avg``, one per ``REWARD_COMPONENT_NAMES``, so the row type is made from that list. A rate or
average is None when there is nothing to divide or average; a telemetry value is None when the machine did not
measure it."""})

BENCHMARK_SUMMARY = TableSpec("benchmark_summary", pa.schema([*BENCHMARK_KEY, *record_columns(SummaryRow)]),
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
