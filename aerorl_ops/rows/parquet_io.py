"""Write and read task items as a Parquet rows file in ``ROW_SCHEMA``; writes are atomic."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq

from aerorl_ops.rows.item_table import (
    OPTIONAL_COLUMNS,
    ROW_SCHEMA,
    SINGLE_IMAGE_COLUMN,
    items_to_table,
    table_to_items,
)
from aerorl_ops.rows.task_item import TaskItem


def write_items_parquet(items: Sequence[TaskItem], path: Path) -> Path:
    """Write ``items`` to ``path`` via a temporary file in the same folder and a rename.

    A reader never sees a half-written file, and a failed write leaves any previous file intact.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = items_to_table(items)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(handle)
    try:
        pq.write_table(table, temporary)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def read_items_parquet(path: Path) -> list[TaskItem]:
    """The items of a rows file written by :func:`write_items_parquet` (or before some columns existed, a
    single-image file's ``image_bytes`` included: ``item_table``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: rows file does not exist (write it with write_items_parquet first)")
    names = pq.read_schema(path).names
    present = {*names, *(["images"] if SINGLE_IMAGE_COLUMN in names else [])}
    missing = [name for name in ROW_SCHEMA.names if name not in present and name not in OPTIONAL_COLUMNS]
    if missing:
        raise ValueError(f"{path}: not a rows file, missing columns {missing} of ROW_SCHEMA")
    wanted = [*ROW_SCHEMA.names, SINGLE_IMAGE_COLUMN]
    return table_to_items(pq.read_table(path, columns=[name for name in wanted if name in names]))
