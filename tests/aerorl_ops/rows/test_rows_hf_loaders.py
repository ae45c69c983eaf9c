from __future__ import annotations

import pyarrow as pa
import pytest

from aerorl_ops.rows import (
    MissingColumnError,
    RowChecks,
    TableFileError,
    load_chartqa_files,
    load_dataset_files,
    load_docvqa_files,
    loader_for,
)


def test_docvqa_rows_carry_ids_text_aliases_and_image(hub_files, file_format):
    image = hub_files.png(shade=10)
    path = hub_files.docvqa(
        [
            hub_files.docvqa_record("49153", "What is the total?", ["1,234", " 1,234 ", "1234", "1,234"], image),
            hub_files.docvqa_record("49154", "Who signed?", ["J. Smith"]),
        ],
        name=f"validation.{file_format}",
        fmt=file_format,
    )

    result = load_docvqa_files([path], split="validation", limit=None)

    assert result.rejected == []
    first, second = result.items
    assert (first.item_id, second.item_id) == ("docvqa-49153", "docvqa-49154")
    assert first.question == "What is the total?"
    assert first.answers == ("1,234", "1234")
    assert first.evidence_entities == ("1,234", "1234")
    assert first.images[0] == image
    assert (first.dataset, first.split, first.source) == ("docvqa", "validation", str(path))


def test_docvqa_accepts_integer_question_ids(hub_files):
    schema = hub_files.docvqa_schema.set(0, pa.field("questionId", pa.int32()))
    table = pa.Table.from_pylist([hub_files.docvqa_record(57344, "Q?", ["a"])], schema=schema)

    result = load_docvqa_files([hub_files.write(table, "d.parquet")], split="validation")

    assert [row.item_id for row in result.items] == ["docvqa-57344"]


def test_chartqa_ids_count_across_shards_in_sorted_path_order(hub_files, file_format):
    records = [hub_files.chartqa_record("Q2", ["7"])]
    second = hub_files.chartqa(records, name=f"val-00001.{file_format}", fmt=file_format)
    first = hub_files.chartqa(
        [hub_files.chartqa_record("Q0", ["12"]), hub_files.chartqa_record("Q1", ["Yes", "Yes"])],
        name=f"val-00000.{file_format}",
        fmt=file_format,
    )

    result = load_chartqa_files([second, first], split="val")

    assert [(row.item_id, row.question, row.answers) for row in result.items] == [
        ("chartqa-val-0", "Q0", ("12",)),
        ("chartqa-val-1", "Q1", ("Yes",)),
        ("chartqa-val-2", "Q2", ("7",)),
    ]
    assert [row.source for row in result.items] == [str(first), str(first), str(second)]


def test_limit_counts_records_read(hub_files):
    path = hub_files.chartqa([hub_files.chartqa_record(f"Q{i}", [str(i)]) for i in range(5)])

    result = load_chartqa_files([path], split="val", limit=2)

    assert [row.item_id for row in result.items] == ["chartqa-val-0", "chartqa-val-1"]
    assert load_chartqa_files([path], split="val", limit=0).records_read == 0
    with pytest.raises(ValueError, match="limit"):
        load_chartqa_files([path], split="val", limit=-1)


def test_missing_file_is_named(tmp_path):
    missing = tmp_path / "nope.parquet"
    with pytest.raises(FileNotFoundError, match="nope.parquet"):
        load_docvqa_files([missing], split="validation")


def test_missing_column_names_file_and_column(hub_files):
    table = pa.table({"questionId": ["1"], "image": [{"bytes": hub_files.png(), "path": None}], "answers": [["a"]]})
    path = hub_files.write(table, "broken.parquet")

    with pytest.raises(MissingColumnError, match=r"broken\.parquet: missing required column 'question'") as caught:
        load_docvqa_files([path], split="validation")
    assert caught.value.column == "question"
    assert caught.value.path == path
    assert "allow_unanswered" not in str(caught.value)


def test_chartqa_file_lacking_label_is_refused(hub_files):
    table = pa.table({"image": [{"bytes": hub_files.png(), "path": None}], "query": ["Q"]})
    path = hub_files.write(table, "val.arrow", fmt="arrow-stream")

    with pytest.raises(MissingColumnError, match="'label'"):
        load_chartqa_files([path], split="val")


def test_docvqa_test_split_without_answers(hub_files):
    path = hub_files.docvqa(
        [hub_files.docvqa_record("1", "Q one?", None), hub_files.docvqa_record("2", "Q two?", None)],
        name="test-00000.parquet",
    )

    strict = load_docvqa_files([path], split="test")
    assert strict.items == []
    reasons = [(rej.sample_id, rej.reason) for rej in strict.rejected]
    assert reasons == [("docvqa-1", "no answers"), ("docvqa-2", "no answers")]

    kept = load_docvqa_files([path], split="test", checks=RowChecks(allow_unanswered=True))
    kept_rows = [(row.item_id, row.answers, row.evidence_entities) for row in kept.items]
    assert kept_rows == [("docvqa-1", (), ()), ("docvqa-2", (), ())]


def test_file_without_answers_column_needs_allow_unanswered(hub_files):
    table = pa.table(
        {"questionId": ["5"], "question": ["Q?"], "image": [{"bytes": hub_files.png(), "path": None}]}
    )
    path = hub_files.write(table, "test.parquet")

    with pytest.raises(MissingColumnError, match="'answers'.*allow_unanswered"):
        load_docvqa_files([path], split="test")
    result = load_docvqa_files([path], split="test", checks=RowChecks(allow_unanswered=True))
    assert [row.item_id for row in result.items] == ["docvqa-5"]


def test_duplicate_question_id_is_rejected_not_dropped(hub_files):
    path = hub_files.docvqa(
        [hub_files.docvqa_record("9", "Q?", ["a"]), hub_files.docvqa_record("9", "Q again?", ["b"])]
    )

    result = load_docvqa_files([path], split="validation")

    assert [row.question for row in result.items] == ["Q?"]
    (rejected,) = result.rejected
    assert rejected.locator == f"{path}#row=1"
    assert rejected.reason == f"duplicate sample id (first seen at {path}#row=0)"


def test_dispatch_by_short_name_or_hub_id(hub_files):
    docvqa = hub_files.docvqa([hub_files.docvqa_record("3", "Q?", ["a"])])
    chartqa = hub_files.chartqa([hub_files.chartqa_record("Q", ["b"])])

    assert load_dataset_files("docvqa", [docvqa], "validation").items[0].item_id == "docvqa-3"
    assert load_dataset_files("lmms-lab/DocVQA", [docvqa], "validation").items[0].item_id == "docvqa-3"
    assert load_dataset_files("HuggingFaceM4/ChartQA", [chartqa], "val").items[0].item_id == "chartqa-val-0"
    assert loader_for("CHARTQA").hub_id == "HuggingFaceM4/ChartQA"
    with pytest.raises(ValueError, match="unknown dataset 'textvqa'.*chartqa"):
        load_dataset_files("textvqa", [docvqa], "validation")


def test_non_table_file_and_repeated_file_are_refused(hub_files, tmp_path):
    junk = tmp_path / "notes.parquet"
    junk.write_text("not a table")
    with pytest.raises(TableFileError, match="notes.parquet: not a readable Parquet or Arrow"):
        load_docvqa_files([junk], split="validation")

    path = hub_files.docvqa([hub_files.docvqa_record("3", "Q?", ["a"])])
    with pytest.raises(ValueError, match="given twice"):
        load_docvqa_files([path, path], split="validation")
    with pytest.raises(ValueError, match="no data files"):
        load_docvqa_files([], split="validation")
