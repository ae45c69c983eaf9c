"""Task items as benchmark rows: one image per question, the environment's messages kept, and the
item surviving the Parquet round trip unchanged."""

from __future__ import annotations

import io

from PIL import Image

from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.envs.configured import benchmark_row, dataset_rows
from aerorl_ops.rows.load_result import RejectedRow
from aerorl_ops.rows.parquet_io import read_items_parquet, write_items_parquet
from aerorl_ops.rows.task_item import TaskItem, prompt_text


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
    shown = item((png(),))
    row = benchmark_row(shown, "shapes")
    assert (row.item_id, row.dataset, row.split, row.question, row.answers, prompt_text(row), row.question_type) == (
        "easy_vqa-test-7", "shapes", "test", "What colour is the shape?", ("teal",),
        "What colour is the shape?\nOne word.", "colour")
    assert row.images == (png(),) and row.evidence_entities == ("teal",) and row.messages == shown.messages
    path = write_items_parquet([row], tmp_path / "rows.parquet")
    assert read_items_parquet(path) == [row]


def test_an_item_without_exactly_one_image_is_rejected_with_the_reason():
    for images in ((), (png(), png())):
        rejected = benchmark_row(item(images), "shapes")
        assert isinstance(rejected, RejectedRow)
        assert rejected.reason == f"has {len(images)} images; the benchmark shows one image per question"


def test_configured_easy_vqa_rows_are_a_fixed_sample_with_their_own_prompt():
    dataset = DatasetSettings("easy_vqa", kind="easy_vqa", split="test", limit=4, seed=0)
    first, again = dataset_rows(dataset), dataset_rows(dataset)
    assert [r.item_id for r in first.items] == [r.item_id for r in again.items] and len(first.items) == 4
    assert not first.rejected
    assert all(prompt_text(r) == f"{r.question}\nAnswer with one word." for r in first.items)
    assert {r.question_type for r in first.items} <= {"yes_no", "colour", "shape"}


def test_configured_synthetic_docvqa_rows_keep_the_json_instruction():
    rows = dataset_rows(DatasetSettings("docs", kind="docvqa", split="validation", limit=2)).items
    assert [r.dataset for r in rows] == ["docs", "docs"]
    assert all(prompt_text(r).endswith('Answer with strict JSON of the form {"answer": "<answer>"} and nothing else.')
               for r in rows)
