from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from aerorl_ops.rows import (
    ROW_SCHEMA,
    TaskItem,
    image_sha256,
    items_to_table,
    parquet_io,
    read_items_parquet,
    synthetic_chartqa_rows,
    synthetic_docvqa_rows,
    table_to_items,
    write_items_parquet,
)

SHAPE_TURN = {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What shape?\nOne word."}]}


def _items() -> list[TaskItem]:
    return [*synthetic_docvqa_rows(2, seed=4), *synthetic_chartqa_rows(2, seed=4)]


def test_round_trip_returns_equal_items(tmp_path):
    items = _items()
    path = write_items_parquet(items, tmp_path / "out" / "rows.parquet")

    assert read_items_parquet(path) == items
    assert [p.name for p in path.parent.iterdir()] == ["rows.parquet"]


def test_unanswered_items_round_trip(tmp_path):
    item = TaskItem("docvqa-1", "docvqa", "test", "f.parquet", "Q?", (), (b"img",))
    assert read_items_parquet(write_items_parquet([item], tmp_path / "r.parquet")) == [item]


def test_messages_and_question_type_round_trip_and_the_prompt_column_is_their_text(tmp_path):
    marked = {"role": "user", "content": [{"type": "text", "text": "Look "}, {"type": "image"},
                                          {"type": "text", "text": " here\nAnswer."}]}
    items = [TaskItem("s-1", "shapes", "test", "q.json", "What shape?", ("circle",), (b"png",), (SHAPE_TURN,),
                      "shape", ("circle", "red")),
             TaskItem("j-1", "geo", "train", "g.jsonl", "Look here", ("3",), (b"jpg",),
                      ({"role": "system", "content": [{"type": "text", "text": "Be brief."}]}, marked))]
    path = write_items_parquet(items, tmp_path / "rows.parquet")

    assert read_items_parquet(path) == items
    table = pq.read_table(path)
    assert table.column("prompt").to_pylist() == ["What shape?\nOne word.", "Look  here\nAnswer."]
    assert table.column("sample_id").to_pylist() == ["s-1", "j-1"]
    assert table.schema.names == ROW_SCHEMA.names


def test_a_file_written_before_messages_were_stored_reads_each_prompt_as_one_user_turn(tmp_path):
    item = TaskItem("s-1", "shapes", "test", "q.json", "What shape?", ("circle",), (b"png",), (SHAPE_TURN,), "shape")
    bare = TaskItem("d-1", "docvqa", "validation", "f.parquet", "Total?", ("12",), (b"png",))
    old = tmp_path / "old.parquet"
    pq.write_table(items_to_table([item, bare]).drop_columns(["messages"]), old)

    assert read_items_parquet(old) == [item, bare]


def test_a_file_written_before_prompts_and_question_types_reads_them_as_empty(tmp_path):
    item = TaskItem("d-1", "docvqa", "validation", "f.parquet", "Total?", ("12",), (b"png",))
    old = tmp_path / "old.parquet"
    pq.write_table(items_to_table([item]).drop_columns(["messages", "prompt", "question_type"]), old)

    assert read_items_parquet(old) == [item]


def test_an_item_with_several_images_or_none_round_trips_with_its_images_in_order(tmp_path):
    two = TaskItem("j-2", "geo", "train", "g.jsonl", "Compare", ("a",), (b"left", b"right"),
                   ({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Compare "},
                                                 {"type": "image"}]},))
    none = TaskItem("t-1", "text", "train", "t.jsonl", "2+2?", ("4",), ())
    path = write_items_parquet([two, none], tmp_path / "rows.parquet")

    assert read_items_parquet(path) == [two, none]
    table = pq.read_table(path)
    assert table.column("images").to_pylist() == [[b"left", b"right"], []]
    joined = "\n".join([image_sha256(b"left"), image_sha256(b"right")])
    assert table.column("image_sha256").to_pylist() == [hashlib.sha256(joined.encode()).hexdigest(), ""]


def test_a_single_image_row_records_its_image_and_that_images_own_hash():
    item = TaskItem("d-1", "docvqa", "validation", "f.parquet", "Total?", ("12",), (b"png",))
    table = items_to_table([item])
    assert table.column("images").to_pylist() == [[b"png"]]
    assert table.column("image_sha256").to_pylist() == [hashlib.sha256(b"png").hexdigest()]


def single_image_file(items: list[TaskItem], path: Path) -> Path:
    """``items`` as a rows file was written when it held one image per question: ``image_bytes``."""
    table = items_to_table(items)
    single = pa.array([images[0] for images in table.column("images").to_pylist()], pa.binary())
    position = table.column_names.index("images")
    pq.write_table(table.remove_column(position).add_column(position, "image_bytes", single), path)
    return path


def test_a_file_written_with_one_image_column_reads_as_before(tmp_path):
    items = [TaskItem("s-1", "shapes", "test", "q.json", "What shape?", ("circle",), (b"png",), (SHAPE_TURN,),
                      "shape"), TaskItem("d-1", "docvqa", "validation", "f.parquet", "Total?", ("12",), (b"jpg",))]
    old = single_image_file(items, tmp_path / "old.parquet")
    assert "images" not in pq.read_schema(old).names

    assert read_items_parquet(old) == items
    assert table_to_items(pq.read_table(old)) == items  # a cached rows asset's table, as the IO manager reads it
    bare = pq.read_table(old).drop_columns(["messages", "prompt", "question_type"])
    assert table_to_items(bare)[1] == items[1]


def test_the_stored_messages_are_json_of_the_items_messages():
    item = TaskItem("s-1", "shapes", "test", "q.json", "What shape?", ("circle",), (b"png",), (SHAPE_TURN,))
    assert json.loads(items_to_table([item]).column("messages")[0].as_py()) == [SHAPE_TURN]


def test_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    path = write_items_parquet(_items()[:1], tmp_path / "rows.parquet")

    def write_half_then_fail(table, where):
        with open(where, "wb") as handle:
            handle.write(b"PAR1 half written")
        raise OSError("disk full")

    monkeypatch.setattr(parquet_io.pq, "write_table", write_half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        write_items_parquet(_items(), path)
    monkeypatch.undo()

    assert len(read_items_parquet(path)) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["rows.parquet"]


def test_reading_a_missing_or_foreign_file_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="absent.parquet"):
        read_items_parquet(tmp_path / "absent.parquet")
    foreign = tmp_path / "other.parquet"
    pq.write_table(pa.table({"sample_id": ["a"]}), foreign)
    with pytest.raises(ValueError, match=r"other.parquet: not a rows file, missing columns \['dataset'"):
        read_items_parquet(foreign)
