"""Questions: the :class:`TaskItem` record, loaders for on-disk hub files, checks, synthetic items and rows files."""

from aerorl_ops.rows.hf_loaders import (
    DATASET_LOADERS,
    ChartQALoader,
    DocVQALoader,
    HubDatasetLoader,
    load_chartqa_files,
    load_dataset_files,
    load_docvqa_files,
    loader_for,
)
from aerorl_ops.rows.item_table import ROW_SCHEMA, items_to_table, table_to_items
from aerorl_ops.rows.load_result import LoadResult, RejectedRow
from aerorl_ops.rows.parquet_io import read_items_parquet, write_items_parquet
from aerorl_ops.rows.synthetic_charts import synthetic_chartqa_rows, synthetic_chartqa_sample
from aerorl_ops.rows.synthetic_documents import synthetic_docvqa_rows, synthetic_docvqa_sample
from aerorl_ops.rows.synthetic_sample import SyntheticSample
from aerorl_ops.rows.table_files import MissingColumnError, TableFileError
from aerorl_ops.rows.task_item import Message, TaskItem, image_sha256, prompt_text
from aerorl_ops.rows.validation import (
    DEFAULT_CHECKS,
    MAX_ALIAS_CHARS,
    MAX_IMAGE_PIXELS,
    MAX_QUESTION_CHARS,
    ItemCandidate,
    RowChecks,
    image_problem,
    validate_item,
)

__all__ = [
    "ChartQALoader",
    "DATASET_LOADERS",
    "DEFAULT_CHECKS",
    "DocVQALoader",
    "HubDatasetLoader",
    "ItemCandidate",
    "LoadResult",
    "MAX_ALIAS_CHARS",
    "MAX_IMAGE_PIXELS",
    "MAX_QUESTION_CHARS",
    "Message",
    "MissingColumnError",
    "ROW_SCHEMA",
    "RejectedRow",
    "RowChecks",
    "SyntheticSample",
    "TableFileError",
    "TaskItem",
    "image_problem",
    "image_sha256",
    "items_to_table",
    "load_chartqa_files",
    "load_dataset_files",
    "load_docvqa_files",
    "loader_for",
    "prompt_text",
    "read_items_parquet",
    "synthetic_chartqa_rows",
    "synthetic_chartqa_sample",
    "synthetic_docvqa_rows",
    "synthetic_docvqa_sample",
    "table_to_items",
    "validate_item",
    "write_items_parquet",
]
