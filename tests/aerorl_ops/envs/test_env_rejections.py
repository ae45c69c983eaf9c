"""An environment's rejected rows: grouped reasons, the one-line summary, ``rejected_rows`` rows, and the
one-line error of a dataset with no usable row."""

from __future__ import annotations

import duckdb
import pytest

from aerorl_ops.config.fields import ConfigError
from aerorl_ops.envs.registry import make_env
from aerorl_ops.envs.rejections import (
    NoUsableRowsError,
    reason_counts,
    reason_kind,
    rejection_summary,
    rejections_write,
)
from aerorl_ops.rows.load_result import RejectedRow
from aerorl_ops.storage.duckdb_store import ensure_tables, rejected_rows_table, replace_partitions
from aerorl_ops.storage.schema import REJECTED_ROWS


def rejected(*reasons: str) -> list[RejectedRow]:
    return [RejectedRow("d.jsonl", f"d.jsonl#line={n}", f"q{n}", reason) for n, reason in enumerate(reasons, 1)]


FIVE = rejected("image file not found: /d/a.png", "no answers", "image file not found: /d/b.png",
                "duplicate item id (first seen at d.jsonl#line=1)", "image file not found: /d/c.png")


@pytest.mark.parametrize(("reason", "kind"), [
    ("image file not found: /d/a.png", "image file not found"),
    ("line is not valid UTF-8 (invalid start byte at byte 0)", "line is not valid UTF-8"),
    ("not valid JSON: Expecting value (column 1)", "not valid JSON"),
    ("image path '../../etc/passwd' leaves the dataset folder: it resolves to /etc/passwd",
     "image path leaves the dataset folder"),
    ("no answers", "no answers"),
])
def test_a_reason_kind_drops_what_names_one_row(reason, kind):
    assert reason_kind(reason) == kind


def test_reasons_are_counted_by_kind_most_first():
    assert reason_counts(FIVE) == [("image file not found", 3), ("no answers", 1), ("duplicate item id", 1)]


def test_the_summary_is_one_line_with_the_top_reasons():
    assert rejection_summary(FIVE) == ("5 rows rejected: image file not found (3), no answers (1), "
                                       "duplicate item id (1)")
    assert rejection_summary(FIVE, shown=1) == ("5 rows rejected: image file not found (3), "
                                                "2 rows for 2 other reasons")
    assert rejection_summary([]) == "no rows rejected"


def test_rejected_rows_land_in_duckdb_and_a_rewrite_replaces_them():
    conn = duckdb.connect()
    ensure_tables(conn, [REJECTED_ROWS])
    table = rejected_rows_table("eval-1", "evaluation", "shapes", FIVE[:2])
    assert table.to_pylist() == [
        {"run_id": "eval-1", "stage": "evaluation", "dataset": "shapes", "locator": "d.jsonl#line=1",
         "sample_id": "q1", "reason": "image file not found: /d/a.png"},
        {"run_id": "eval-1", "stage": "evaluation", "dataset": "shapes", "locator": "d.jsonl#line=2",
         "sample_id": "q2", "reason": "no answers"}]
    replace_partitions(conn, [rejections_write("eval-1", "evaluation", "shapes", FIVE)])
    replace_partitions(conn, [rejections_write("eval-1", "evaluation", "shapes", FIVE[1:2])])
    replace_partitions(conn, [rejections_write("eval-2", "evaluation", "shapes", FIVE[:1])])
    assert conn.execute("SELECT run_id, locator, reason FROM rejected_rows ORDER BY ALL").fetchall() == [
        ("eval-1", "d.jsonl#line=2", "no answers"), ("eval-2", "d.jsonl#line=1", "image file not found: /d/a.png")]


def test_a_jsonl_file_with_no_usable_line_is_one_config_error(tiny_files):
    tiny_files.image("ok.png")
    path = tiny_files.jsonl("shapes.jsonl", [
        {"id": "a", "question": "Shape?", "answer": "circle", "image": "missing-1.png"},
        {"id": "b", "question": "Shape?", "image": "ok.png"},
        {"id": "c", "question": "Shape?", "answer": "square", "image": "missing-2.png"},
        b"\xff\xfe not utf-8"])
    with pytest.raises(NoUsableRowsError) as error:
        make_env("jsonl", path=str(path), name="shapes")
    assert isinstance(error.value, ConfigError)
    assert str(error.value) == (
        f"dataset 'shapes' (file {path}) has no usable row: all 4 rows read were rejected: "
        f"image file not found (2), no answers (1), line is not valid UTF-8 (1); the first, {path}#line=1: image "
        f"file not found: {tiny_files.folder / 'missing-1.png'}. Fix the rows, or point the dataset at another file")
    assert [row.locator for row in error.value.rejected] == [f"{path}#line={n}" for n in (1, 2, 3, 4)]


def test_an_empty_file_names_itself(tiny_files):
    path = tiny_files.text("empty.jsonl", b"\n\n")
    with pytest.raises(NoUsableRowsError, match=r"^dataset 'empty' \(file .*empty.jsonl\) has no usable row: no row "
                                                r"was read"):
        make_env("jsonl", path=str(path))


def test_a_parquet_file_with_no_usable_row_is_one_config_error(tiny_files):
    records = [tiny_files.verl_record(0, "<image>Shape?", None, [{"bytes": tiny_files.png(), "path": None}]),
               tiny_files.verl_record(1, "<image>Shape?", "circle", [{"bytes": b"not a png", "path": None}])]
    path = tiny_files.verl_parquet("geo.parquet", records)
    with pytest.raises(NoUsableRowsError) as error:
        make_env("parquet", path=str(path))
    assert str(error.value).startswith(f"dataset 'geo' (file {path}) has no usable row: all 2 rows read were "
                                       "rejected: no answers (1), corrupt image (1); the first, ")


def test_one_usable_row_is_enough(tiny_files):
    tiny_files.image("ok.png")
    path = tiny_files.jsonl("shapes.jsonl", [{"id": "a", "question": "Shape?", "answer": "circle", "image": "ok.png"},
                                             {"id": "b", "question": "Shape?", "image": "ok.png"}])
    env = make_env("jsonl", path=str(path))
    assert (len(env), [row.reason for row in env.rejected]) == (1, ["no answers"])
