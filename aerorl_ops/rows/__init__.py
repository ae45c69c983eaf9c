"""Dataset rows: the :class:`Row` type, loaders for on-disk hub files, checks, and synthetic rows."""

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
from aerorl_ops.rows.load_result import LoadResult, RejectedRow
from aerorl_ops.rows.parquet_io import read_rows_parquet, write_rows_parquet
from aerorl_ops.rows.row import ROW_SCHEMA, Row, image_sha256, rows_to_table, table_to_rows
from aerorl_ops.rows.synthetic_charts import synthetic_chartqa_rows, synthetic_chartqa_sample
from aerorl_ops.rows.synthetic_documents import synthetic_docvqa_rows, synthetic_docvqa_sample
from aerorl_ops.rows.synthetic_sample import SyntheticSample
from aerorl_ops.rows.table_files import MissingColumnError, TableFileError
from aerorl_ops.rows.validation import (
    DEFAULT_CHECKS,
    MAX_ALIAS_CHARS,
    MAX_IMAGE_PIXELS,
    MAX_QUESTION_CHARS,
    RowCandidate,
    RowChecks,
    image_problem,
    validate_row,
)

__all__ = [
    "DATASET_LOADERS",
    "DEFAULT_CHECKS",
    "MAX_ALIAS_CHARS",
    "MAX_IMAGE_PIXELS",
    "MAX_QUESTION_CHARS",
    "ROW_SCHEMA",
    "ChartQALoader",
    "DocVQALoader",
    "HubDatasetLoader",
    "LoadResult",
    "MissingColumnError",
    "RejectedRow",
    "Row",
    "RowCandidate",
    "RowChecks",
    "SyntheticSample",
    "TableFileError",
    "image_problem",
    "image_sha256",
    "load_chartqa_files",
    "load_dataset_files",
    "load_docvqa_files",
    "loader_for",
    "read_rows_parquet",
    "rows_to_table",
    "synthetic_chartqa_rows",
    "synthetic_chartqa_sample",
    "synthetic_docvqa_rows",
    "synthetic_docvqa_sample",
    "table_to_rows",
    "validate_row",
    "write_rows_parquet",
]
