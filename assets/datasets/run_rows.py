"""The rows assets of the environments a training run and an evaluation draw (``assets.run_rows``).

Each materialization builds its environment from the source, as the reader would
(``aerorl_ops.envs.cached.env_table``), and caches its items with what they were drawn from and the
records the environment rejected. Its data version is the items' content hash, so materializing it
again from an unchanged source leaves its readers fresh, and a changed dataset turns them stale.
"""

from __future__ import annotations

import dagster as dg
import pyarrow as pa

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.envs.cached import env_table, items_sha256, table_not_kept, table_rejected, table_source
from aerorl_ops.rows.item_table import table_to_items
from assets.datasets.rows import FINGERPRINT_KEY, ROWS_AUTOMATION
from assets.metadata import markdown_preview
from assets.run_rows import RunRows, eval_rows, training_rows


def run_rows_materialization(dataset: DatasetSettings) -> dg.MaterializeResult[pa.Table]:
    """The cached environment of ``dataset``: the table, its content hash as the data version, what it was
    drawn from, its counts and a preview."""
    table = env_table(dataset)
    content = items_sha256(table_to_items(table))
    source, not_kept = table_source(table), table_not_kept(table)
    preview = table.select(["sample_id", "question", "answers"]).to_pandas()
    return dg.MaterializeResult(value=table, data_version=dg.DataVersion(content), metadata={
        "dagster/row_count": table.num_rows,
        "content_sha256": content,
        "rows_rejected": len(table_rejected(table)),
        **({"items_not_kept": not_kept} if not_kept else {}),
        "preview": markdown_preview(preview),
        FINGERPRINT_KEY: dg.MetadataValue.json(source.as_dict()),
    })


def build_run_rows(rows: RunRows) -> dg.AssetsDefinition:
    """The asset caching ``rows``' environment."""

    @dg.asset(key=rows.key, group_name="datasets", kinds={"parquet"}, automation_condition=ROWS_AUTOMATION,
              description=rows.description)
    def run_rows() -> dg.MaterializeResult[pa.Table]:
        return run_rows_materialization(rows.dataset)

    return run_rows


def build_run_rows_assets(bench: BenchmarkConfig) -> list[dg.AssetsDefinition]:
    """The rows assets of ``rl_run`` and of the evaluations, at ``bench``'s settings."""
    evaluation = eval_rows(bench)
    return [build_run_rows(rows) for rows in [*training_rows(bench).values(), *([evaluation] if evaluation else [])]]
