"""The Parquet IO manager keeps every partition's file inside its base folder."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
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


def test_a_file_url_is_the_same_local_folder(tmp_path: Path):
    manager = ParquetTableIOManager(base_dir=f"file://{tmp_path}")
    path = manager._path(dg.AssetKey("generations"), "4|tiny-qwen2-vl")
    assert path == (tmp_path / "generations" / "4__tiny-qwen2-vl.parquet").resolve()
    table = pa.table({"sample_id": ["a", "b"]})
    manager.handle_output(dg.build_output_context(asset_key=dg.AssetKey("generations"), partition_key="1"), table)
    assert pq.read_table(tmp_path / "generations" / "1.parquet").equals(table)
    loaded = manager.load_input(dg.build_input_context(
        asset_key=dg.AssetKey("generations"), partition_key="1",
        asset_partitions_def=dg.StaticPartitionsDefinition(["1"])))
    assert loaded.equals(table)
    assert [entry.name for entry in (tmp_path / "generations").iterdir()] == ["1.parquet"]  # no temporary left
