"""Write and read :class:`Row` lists as Parquet in ``ROW_SCHEMA``; writes are atomic."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

from aerorl_ops.rows.row import OPTIONAL_COLUMNS, ROW_SCHEMA, Row, rows_to_table, table_to_rows


def write_rows_parquet(rows: list[Row], path: Path) -> Path:
    """Write ``rows`` to ``path`` via a temporary file in the same folder and a rename.

    A reader never sees a half-written file, and a failed write leaves any previous file intact.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = rows_to_table(rows)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(handle)
    try:
        pq.write_table(table, temporary)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def read_rows_parquet(path: Path) -> list[Row]:
    """Rows from a file written by :func:`write_rows_parquet`."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: rows file does not exist (write it with write_rows_parquet first)")
    names = pq.read_schema(path).names
    missing = [name for name in ROW_SCHEMA.names if name not in names and name not in OPTIONAL_COLUMNS]
    if missing:
        raise ValueError(f"{path}: not a rows file, missing columns {missing} of ROW_SCHEMA")
    return table_to_rows(pq.read_table(path, columns=[name for name in ROW_SCHEMA.names if name in names]))
