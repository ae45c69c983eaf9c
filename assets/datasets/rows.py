"""Cached dataset rows: ``docvqa_rows`` and ``chartqa_rows`` (Parquet under ``data/cache``)."""


from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pyarrow as pa
from dagster_duckdb import DuckDBResource

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.rows import LoadResult, load_dataset_files, rows_to_table
from aerorl_ops.rows.synthetic_charts import synthetic_chartqa_rows
from aerorl_ops.rows.synthetic_documents import synthetic_docvqa_rows
from assets.metadata import counts_markdown, markdown_preview
from assets.rejections import record_rejections
from assets.runs import benchmark_run_id

SYNTHETIC_GENERATORS: dict[str, Callable[..., list]] = {
    "docvqa": synthetic_docvqa_rows,
    "chartqa": synthetic_chartqa_rows,
}
ROWS_AUTOMATION = dg.AutomationCondition.on_cron("0 1 * * *")


class DatasetRowsConfig(dg.Config):
    """Where rows come from. With no ``files`` the embedded synthetic rows are generated.

    files: Parquet or Arrow shards of the Hugging Face dataset already on disk.
    split: the split those files hold (synthetic rows are labelled with it too).
    limit: at most this many rows; 0 means the benchmark config's row count.
    seed: seed of the synthetic generator; -1 means the benchmark config's seed.
    """

    files: list[str] = []
    split: str = "validation"
    limit: int = 0
    seed: int = -1


def load_rows(dataset: str, config: DatasetRowsConfig, default_count: int, default_seed: int) -> LoadResult:
    """Rows of ``dataset`` as configured: from files when given, else synthetic."""
    limit = config.limit or default_count
    if config.files:
        return load_dataset_files(dataset, [Path(f) for f in config.files], config.split, limit)
    seed = default_seed if config.seed < 0 else config.seed
    return LoadResult(rows=SYNTHETIC_GENERATORS[dataset](limit, seed, config.split))


def materialize_rows(context: dg.AssetExecutionContext, dataset: str, config: DatasetRowsConfig,
                     duckdb: DuckDBResource, default_count: int, default_seed: int) -> dg.Output[pa.Table]:
    result = load_rows(dataset, config, default_count, default_seed)
    record_rejections(duckdb, benchmark_run_id(context), context.asset_key.to_user_string(), dataset,
                      result.rejected)
    for rejected in result.rejected[:20]:
        context.log.warning(f"rejected {rejected.locator}: {rejected.reason}")
    table = rows_to_table(result.rows)
    preview = table.drop_columns(["image_bytes"]).to_pandas()
    return dg.Output(table, metadata={
        "dagster/row_count": table.num_rows,
        "rows_read": result.records_read,
        "rows_rejected": len(result.rejected),
        "counts": counts_markdown([("read", result.records_read), ("accepted", table.num_rows),
                                   ("rejected", len(result.rejected))]),
        "preview": markdown_preview(preview[["sample_id", "question", "answers", "source"]]),
    })


def build_rows_assets(bench: BenchmarkConfig) -> list[dg.AssetsDefinition]:
    """``docvqa_rows`` and ``chartqa_rows``; unset row counts and seed come from ``bench``."""

    @dg.asset(group_name="datasets", pool="duckdb_writer", automation_condition=ROWS_AUTOMATION,
              kinds={"parquet"})
    def docvqa_rows(context: dg.AssetExecutionContext, config: DatasetRowsConfig,
                    duckdb: DuckDBResource) -> dg.Output[pa.Table]:
        """DocVQA-shaped rows: question, every answer alias, document image."""
        return materialize_rows(context, "docvqa", config, duckdb, bench.docvqa_rows, bench.seed)

    @dg.asset(group_name="datasets", pool="duckdb_writer", automation_condition=ROWS_AUTOMATION,
              kinds={"parquet"})
    def chartqa_rows(context: dg.AssetExecutionContext, config: DatasetRowsConfig,
                     duckdb: DuckDBResource) -> dg.Output[pa.Table]:
        """ChartQA-shaped rows: question, every answer alias, chart image."""
        return materialize_rows(context, "chartqa", config, duckdb, bench.chartqa_rows, bench.seed)

    return [docvqa_rows, chartqa_rows]
