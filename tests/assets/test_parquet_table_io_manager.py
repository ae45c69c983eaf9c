"""The Parquet IO manager keeps every partition's file inside its base folder, and cleans up after dead writers."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
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



def test_a_dead_writers_temporary_file_is_removed_with_a_warning_and_a_live_ones_kept(tmp_path: Path):
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()  # its pid names no process now
    folder = tmp_path / "table"
    folder.mkdir()
    leftover, live = folder / f"all.{dead.pid}.tmp", folder / f"all.{os.getppid()}.tmp"
    other_file = folder / f"all.5.{dead.pid}.tmp"  # a partition "all.5"'s, not this file's
    for path in (leftover, live, other_file):
        path.write_bytes(b"half a parquet file")

    @dg.asset
    def table() -> pa.Table:
        return pa.table({"sample_id": ["a"]})

    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([table], resources={"io_manager": ParquetTableIOManager(base_dir=str(tmp_path))},
                            instance=instance)
    assert sorted(entry.name for entry in folder.iterdir()) == sorted(["all.parquet", live.name, other_file.name])
    assert pq.read_table(folder / "all.parquet").equals(pa.table({"sample_id": ["a"]}))
    warnings = [entry.user_message for entry in instance.all_logs(result.run_id) if entry.level == logging.WARNING]
    assert warnings == [f"removed {leftover}: a temporary file left by process {dead.pid}, which is gone"]
