"""Task items as benchmark rows: one image per question, the environment's prompt kept, and the
row surviving the Parquet round trip unchanged."""

from __future__ import annotations

import io

from PIL import Image

from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.envs.configured import dataset_rows, item_row
from aerorl_ops.envs.types import TaskItem
from aerorl_ops.rows.load_result import RejectedRow
from aerorl_ops.rows.parquet_io import read_rows_parquet, write_rows_parquet


def png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), "teal").save(buffer, format="PNG")
    return buffer.getvalue()


def item(images: tuple[bytes, ...]) -> TaskItem:
    return TaskItem("easy_vqa-test-7", "easy_vqa", "test", "questions.json", "What colour is the shape?",
                    ("teal",), images,
                    ({"role": "user", "content": [{"type": "image"},
                                                  {"type": "text", "text": "What colour is the shape?\nOne word."}]},),
                    question_type="colour")


def test_an_item_becomes_a_row_and_round_trips_through_parquet(tmp_path):
    row = item_row(item((png(),)), "shapes")
    assert (row.sample_id, row.dataset, row.split, row.question, row.answers, row.prompt, row.question_type) == (
        "easy_vqa-test-7", "shapes", "test", "What colour is the shape?", ("teal",),
        "What colour is the shape?\nOne word.", "colour")
    assert row.image_bytes == png() and row.evidence_entities == ("teal",)
    path = write_rows_parquet([row], tmp_path / "rows.parquet")
    assert read_rows_parquet(path) == [row]


def test_an_item_without_exactly_one_image_is_rejected_with_the_reason():
    for images in ((), (png(), png())):
        rejected = item_row(item(images), "shapes")
        assert isinstance(rejected, RejectedRow)
        assert rejected.reason == f"has {len(images)} images; the benchmark shows one image per question"


def test_configured_easy_vqa_rows_are_a_fixed_sample_with_their_own_prompt():
    dataset = DatasetSettings("easy_vqa", kind="easy_vqa", split="test", limit=4, seed=0)
    first, again = dataset_rows(dataset), dataset_rows(dataset)
    assert [r.sample_id for r in first.rows] == [r.sample_id for r in again.rows] and len(first.rows) == 4
    assert not first.rejected
    assert all(r.prompt == f"{r.question}\nAnswer with one word." for r in first.rows)
    assert {r.question_type for r in first.rows} <= {"yes_no", "colour", "shape"}


def test_configured_synthetic_docvqa_rows_keep_the_json_instruction():
    rows = dataset_rows(DatasetSettings("docs", kind="docvqa", split="validation", limit=2)).rows
    assert [r.dataset for r in rows] == ["docs", "docs"]
    assert all(r.prompt.endswith('Answer with strict JSON of the form {"answer": "<answer>"} and nothing else.')
               for r in rows)
