"""The Parquet IO manager keeps every partition's file inside its base folder."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from assets.io_managers import ParquetTableIOManager


def test_partition_keys_become_safe_file_names(tmp_path: Path):
    manager = ParquetTableIOManager(base_dir=str(tmp_path))
    path = manager._path(dg.AssetKey("generations"), "4|tiny-qwen2-vl")
    assert path == (tmp_path / "generations" / "4__tiny-qwen2-vl.parquet").resolve()
    assert manager._path(dg.AssetKey("docvqa_rows"), None).name == "all.parquet"


@pytest.mark.parametrize("key", ["../../etc/passwd", "a/../../b", "..|x", "/abs/path"])
def test_no_partition_key_escapes_the_base_folder(tmp_path: Path, key: str):
    manager = ParquetTableIOManager(base_dir=str(tmp_path / "cache"))
    try:
        path = manager._path(dg.AssetKey("generations"), key)
    except ValueError:
        return
    assert (tmp_path / "cache").resolve() in path.parents
