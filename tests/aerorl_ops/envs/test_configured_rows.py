"""Task items as benchmark rows: at most the dataset's ``max_images`` images per question (none: a text-only row),
the environment's messages kept, and the item surviving the Parquet round trip unchanged."""

from __future__ import annotations

import io
import json
from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from aerorl_ops.config.datasets import MAX_IMAGES_DEFAULT, DatasetSettings
from aerorl_ops.config.fields import ConfigError
from aerorl_ops.envs.configured import benchmark_row, dataset_env, dataset_fingerprint, dataset_rows
from aerorl_ops.generation.prompts import benchmark_messages
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


def test_an_item_without_an_image_is_a_text_only_row_asked_as_text(tmp_path):
    text_only = replace(item(()), messages=({"role": "user", "content": [
        {"type": "text", "text": "What colour is teal?\nOne word."}]},))
    row = benchmark_row(text_only, "shapes")
    assert (row.images, row.dataset) == ((), "shapes")
    assert benchmark_messages(row) == [{"role": "user", "content": [
        {"type": "text", "text": "What colour is teal?\nOne word."}]}]
    assert read_items_parquet(write_items_parquet([row], tmp_path / "rows.parquet")) == [row]


def test_an_item_over_max_images_is_rejected_naming_it_and_one_within_is_a_row(tmp_path):
    five = item((png(),) * 5)
    assert benchmark_row(five, "shapes", max_images=4) == RejectedRow(
        "questions.json", "easy_vqa-test-7", "easy_vqa-test-7", "item 'easy_vqa-test-7' has 5 images, max_images = 4")
    row = benchmark_row(five, "shapes", max_images=5)
    assert row.images == (png(),) * 5
    assert read_items_parquet(write_items_parquet([row], tmp_path / "rows.parquet")) == [row]


def test_markers_that_do_not_match_the_images_are_a_rejection():
    marked = TaskItem("m-1", "geo", "test", "g.jsonl", "Compare <image> with <image> and <image>", ("a",),
                      (png(), png()))
    rejected = benchmark_row(marked, "geo")
    assert rejected.reason == "its benchmark prompt: text has 3 <image> markers for 2 images"


def test_a_dataset_rejects_its_rows_over_max_images_in_the_benchmark_and_in_its_environment(tmp_path):
    folder = tmp_path / "pairs"
    folder.mkdir()
    for name, colour in (("a", "red"), ("b", "blue"), ("c", "green")):
        Image.new("RGB", (8, 8), colour).save(folder / f"{name}.png")
    lines = [{"id": "one", "question": "What colour?", "answer": "red", "image": "a.png"},
             {"id": "two", "question": "<image> or <image>?", "answer": "left", "image": ["a.png", "b.png"]},
             {"id": "three", "question": "Which?", "answer": "c", "image": ["a.png", "b.png", "c.png"]}]
    (folder / "q.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    dataset = DatasetSettings("pairs", kind="jsonl", split="test", limit=None, path=str(folder / "q.jsonl"),
                              max_images=2)
    rows = dataset_rows(dataset)
    assert [(r.item_id, len(r.images)) for r in rows.items] == [("one", 1), ("two", 2)]
    reason = "item 'three' has 3 images, max_images = 2"
    assert [(r.sample_id, r.reason) for r in rows.rejected] == [("three", reason)]
    env = dataset_env(dataset)
    assert [i.item_id for i in env.items] == ["one", "two"] and [r.reason for r in env.rejected] == [reason]
    assert [len(i.images) for i in dataset_env(replace(dataset, max_images=8)).items] == [1, 2, 3]


def test_a_dataset_at_the_default_max_images_keeps_its_fingerprint_and_another_value_changes_it():
    dataset = DatasetSettings("easy_vqa", kind="easy_vqa", split="test", limit=4)
    assert dataset.max_images == MAX_IMAGES_DEFAULT
    assert "max_images" not in dict(dataset_fingerprint(dataset).settings)
    assert dict(dataset_fingerprint(replace(dataset, max_images=2)).settings)["max_images"] == "2"


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


@pytest.mark.parametrize(("content", "problem"), [
    (b"PAR1 not really", "not a readable Parquet or Arrow IPC file"),
    (None, "missing required column 'prompt'"),
])
def test_a_rows_file_that_is_no_table_is_a_config_error_naming_the_dataset(tmp_path, content, problem):
    # found by fuzzing: the rows asset let TableFileError out, so `aerorl bench` printed it as a fault (exit 1)
    path = tmp_path / "rows.parquet"
    if content is None:
        pq.write_table(pa.table({"images": [["a.png"]]}), path)
    else:
        path.write_bytes(content)
    with pytest.raises(ConfigError) as raised:
        dataset_rows(DatasetSettings("shapes", kind="parquet", split="test", limit=None, path=str(path)))
    assert str(raised.value).startswith(f"dataset 'shapes': {path}: ") and problem in str(raised.value)
