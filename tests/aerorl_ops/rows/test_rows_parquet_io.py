from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from aerorl_ops.rows import (
    Row,
    parquet_io,
    read_rows_parquet,
    synthetic_chartqa_rows,
    synthetic_docvqa_rows,
    write_rows_parquet,
)


def _rows() -> list[Row]:
    return [*synthetic_docvqa_rows(2, seed=4), *synthetic_chartqa_rows(2, seed=4)]


def test_round_trip_returns_equal_rows(tmp_path):
    rows = _rows()
    path = write_rows_parquet(rows, tmp_path / "out" / "rows.parquet")

    assert read_rows_parquet(path) == rows
    assert [p.name for p in path.parent.iterdir()] == ["rows.parquet"]


def test_unanswered_rows_round_trip(tmp_path):
    row = Row("docvqa-1", "docvqa", "test", "Q?", (), b"img", "f.parquet")
    assert read_rows_parquet(write_rows_parquet([row], tmp_path / "r.parquet")) == [row]


def test_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    path = write_rows_parquet(_rows()[:1], tmp_path / "rows.parquet")

    def write_half_then_fail(table, where):
        with open(where, "wb") as handle:
            handle.write(b"PAR1 half written")
        raise OSError("disk full")

    monkeypatch.setattr(parquet_io.pq, "write_table", write_half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        write_rows_parquet(_rows(), path)
    monkeypatch.undo()

    assert len(read_rows_parquet(path)) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["rows.parquet"]


def test_reading_a_missing_or_foreign_file_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="absent.parquet"):
        read_rows_parquet(tmp_path / "absent.parquet")
    foreign = tmp_path / "other.parquet"
    pq.write_table(pa.table({"sample_id": ["a"]}), foreign)
    with pytest.raises(ValueError, match=r"other.parquet: not a rows file, missing columns \['dataset'"):
        read_rows_parquet(foreign)
