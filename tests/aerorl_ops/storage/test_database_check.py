"""A damaged report database is named, with how to recover, before any work; nothing is written to it."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from aerorl_ops.config.fields import ConfigError
from aerorl_ops.storage.database_check import DamagedDatabaseError, check_report_database


@pytest.fixture
def real_database(tmp_path: Path) -> Path:
    """A healthy database whose one table fills three storage blocks (about 800 KB)."""
    path = tmp_path / "aerorl.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE generations AS SELECT range AS sample, 'answer ' || range AS response "
                     "FROM range(100000)")
    return path


def truncated_copy(source: Path, size: int) -> Path:
    path = source.with_name(f"truncated-{size}.duckdb")
    shutil.copy(source, path)
    with path.open("r+b") as handle:
        handle.truncate(size)
    return path


def assert_damaged(path: Path, reason: str) -> None:
    before = path.read_bytes()
    with pytest.raises(DamagedDatabaseError) as caught:
        check_report_database(path)
    message = str(caught.value)
    assert isinstance(caught.value, ConfigError)  # the command line prints it as one line, exit 2
    assert "\n" not in message
    assert message.startswith(f"the report database {path} is damaged (")
    assert reason in message
    assert f"mv {path} {path}.damaged" in message and "data/ are intact" in message
    assert path.read_bytes() == before  # nothing written into it
    assert sorted(p.name for p in path.parent.iterdir() if p.name.startswith(path.name)) == [path.name]  # no .wal


def test_a_healthy_database_and_an_absent_one_pass(real_database, tmp_path):
    check_report_database(real_database)
    absent = tmp_path / "reports" / "aerorl.duckdb"
    check_report_database(absent)
    assert not absent.exists() and not absent.parent.exists()  # nothing created


def test_a_file_of_garbage_bytes_is_damaged(tmp_path):
    path = tmp_path / "aerorl.duckdb"
    path.write_bytes(bytes(range(256)) * 20)
    assert_damaged(path, "not a valid DuckDB database file")


def test_an_empty_file_is_damaged(tmp_path):
    path = tmp_path / "aerorl.duckdb"
    path.write_bytes(b"")
    assert_damaged(path, "not a valid DuckDB database file")


def test_a_database_truncated_in_its_header_is_damaged(real_database):
    assert_damaged(truncated_copy(real_database, 100), "Could not read enough bytes")


@pytest.mark.parametrize("cut", [4096, 400_000])
def test_a_database_truncated_in_its_data_is_damaged_though_it_opens(real_database, cut):
    size = real_database.stat().st_size - cut
    with duckdb.connect(str(truncated_copy(real_database, size)), read_only=True) as conn:
        conn.execute("SELECT 1 FROM duckdb_tables()")  # DuckDB itself opens it and reads its catalog
    assert_damaged(real_database.with_name(f"truncated-{size}.duckdb"),
                   f"truncated: {size} bytes, its tables need {real_database.stat().st_size}")


def test_a_database_open_for_writing_in_this_process_passes(real_database):
    with duckdb.connect(str(real_database)) as writer:
        writer.execute("INSERT INTO generations VALUES (-1, 'pending')")
        check_report_database(real_database)


def test_an_unreadable_path_is_named(tmp_path):
    path = tmp_path / "aerorl.duckdb"
    path.mkdir()  # a folder where the file should be: DuckDB cannot read it
    with pytest.raises(DamagedDatabaseError, match=r"\(IO Error: Could not read from file .*Is a directory\)"):
        check_report_database(path)
    assert list(path.iterdir()) == []
