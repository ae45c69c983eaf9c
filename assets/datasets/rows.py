"""Cached dataset rows: one ``<name>_rows`` asset per ``[datasets.<name>]`` table (Parquet under ``data/cache``).

Each asset builds its dataset's task environment (``aerorl_ops.envs.configured.dataset_rows``)
and caches the items as rows; rejected records land in ``rejected_rows`` with their reasons. Each
materialization records what the rows were built from (``source_fingerprint`` metadata, its hash
as the data version), so ``recorded_fingerprint`` can tell cached rows whose source has changed since.
"""


from dataclasses import replace

import dagster as dg
import pyarrow as pa
from dagster_duckdb import DuckDBResource

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.envs.configured import dataset_fingerprint, dataset_rows
from aerorl_ops.envs.rejections import NoUsableRowsError
from aerorl_ops.rows import LoadResult, items_to_table
from aerorl_ops.rows.source_fingerprint import SourceFingerprint
from assets.metadata import counts_markdown, markdown_preview
from assets.rejections import record_rejections
from assets.runs import benchmark_run_id
from assets.step_placement import DUCKDB_WRITER_POOL, DUCKDB_WRITER_TAGS

ROWS_AUTOMATION = dg.AutomationCondition.on_cron("0 1 * * *")
FINGERPRINT_KEY = "source_fingerprint"
"""The metadata entry holding the source fingerprint of a rows materialization."""


class DatasetRowsConfig(dg.Config):
    """Overrides of this run; each left at its default keeps the config file's ``[datasets.<name>]`` value.

    files: dataset files to read instead of the table's ``path`` (e.g. Hugging Face shards on disk).
    split: the split to read; empty means the table's.
    limit: at most this many rows; 0 means the table's ``limit``.
    seed: seed of the sample (and of synthetic rows); -1 means the table's.
    """

    files: list[str] = []
    split: str = ""
    limit: int = 0
    seed: int = -1


def configured_dataset(dataset: DatasetSettings, config: DatasetRowsConfig) -> DatasetSettings:
    """``dataset`` with this run's overrides applied (every other setting kept)."""
    return replace(dataset, split=config.split or dataset.split, limit=config.limit or dataset.limit,
                   seed=dataset.seed if config.seed < 0 else config.seed)


def load_rows(dataset: DatasetSettings, config: DatasetRowsConfig) -> LoadResult:
    """Rows of ``dataset`` as configured, with this run's overrides."""
    return dataset_rows(configured_dataset(dataset, config), config.files)


def rows_source(dataset: DatasetSettings, config: DatasetRowsConfig) -> SourceFingerprint:
    """What ``load_rows(dataset, config)`` builds its rows from."""
    return dataset_fingerprint(configured_dataset(dataset, config), config.files)


def recorded_fingerprint(instance: dg.DagsterInstance, dataset: DatasetSettings) -> SourceFingerprint | None:
    """The source fingerprint the latest materialization of ``dataset``'s rows recorded; ``None`` when
    there is none (never materialized, or cached before fingerprints were recorded)."""
    return recorded_source(instance, dg.AssetKey(dataset.asset_name))


def recorded_source(instance: dg.DagsterInstance, key: dg.AssetKey) -> SourceFingerprint | None:
    """The source fingerprint the latest materialization of the rows asset ``key`` recorded (``None`` as
    ``recorded_fingerprint`` says)."""
    event = instance.get_latest_materialization_event(key)
    materialization = event.asset_materialization if event is not None else None
    if materialization is None or FINGERPRINT_KEY not in materialization.metadata:
        return None
    try:
        return SourceFingerprint.from_dict(materialization.metadata[FINGERPRINT_KEY].value)
    except ValueError as error:
        raise ValueError(f"{key.to_user_string()}: its latest materialization's {FINGERPRINT_KEY} is unreadable "
                         f"({error}); materialize it again (`aerorl bench` without --skip-rows)") from None


def rows_materialization(context: dg.AssetExecutionContext, dataset: DatasetSettings, config: DatasetRowsConfig,
                         duckdb: DuckDBResource) -> dg.MaterializeResult[pa.Table]:
    """The rows of ``dataset`` as its rows asset's materialization: the table, the source's data version, the
    counts and a preview; every rejected row recorded (also when none is usable)."""
    run_id, stage = benchmark_run_id(context), context.asset_key.to_user_string()
    source = rows_source(dataset, config)  # before the read: a change made during it shows next time
    try:
        result = load_rows(dataset, config)
    except NoUsableRowsError as error:  # nothing to cache, but every rejection is still recorded
        record_rejections(duckdb, run_id, stage, dataset.name, error.rejected)
        raise
    record_rejections(duckdb, run_id, stage, dataset.name, result.rejected)
    for rejected in result.rejected[:20]:
        context.log.warning(f"rejected {rejected.locator}: {rejected.reason}")
    table = items_to_table(result.items)
    preview = table.drop_columns(["images"]).to_pandas()
    return dg.MaterializeResult(value=table, data_version=dg.DataVersion(source.version), metadata={
        "dagster/row_count": table.num_rows,
        "kind": dataset.kind,
        "rows_read": result.records_read,
        "rows_rejected": len(result.rejected),
        "counts": counts_markdown([("read", result.records_read), ("accepted", table.num_rows),
                                   ("rejected", len(result.rejected))]),
        "preview": markdown_preview(preview[["sample_id", "question", "answers", "source"]]),
        FINGERPRINT_KEY: dg.MetadataValue.json(source.as_dict()),
    })


def build_dataset_rows(dataset: DatasetSettings) -> dg.AssetsDefinition:
    """The ``<name>_rows`` asset of one configured dataset."""

    @dg.asset(name=dataset.asset_name, group_name="datasets", pool=DUCKDB_WRITER_POOL, op_tags=DUCKDB_WRITER_TAGS,
              automation_condition=ROWS_AUTOMATION, kinds={"parquet"},
              description=f"Rows of the {dataset.name!r} dataset (kind {dataset.kind}, split {dataset.split}): "
                          "question, every answer alias, image, prompt.")
    def rows_asset(context: dg.AssetExecutionContext, config: DatasetRowsConfig,
                   duckdb: DuckDBResource) -> dg.MaterializeResult[pa.Table]:
        return rows_materialization(context, dataset, config, duckdb)

    return rows_asset


def build_rows_assets(bench: BenchmarkConfig) -> list[dg.AssetsDefinition]:
    """One rows asset per configured dataset."""
    return [build_dataset_rows(dataset) for dataset in bench.datasets]
