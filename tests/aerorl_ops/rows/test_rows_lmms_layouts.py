"""The hub loaders read lmms-eval's layouts: ``lmms-lab/ChartQA`` (question / answer / type) and ``lmms-lab/DocVQA``."""

from __future__ import annotations

import pyarrow as pa
import pytest

from aerorl_ops.rows import MissingColumnError, load_chartqa_files, load_dataset_files, load_docvqa_files, loader_for
from aerorl_ops.rows.hf_loaders import CHARTQA, LMMS_CHARTQA

IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
LMMS_CHARTQA_SCHEMA = pa.schema([("type", pa.string()), ("question", pa.string()), ("answer", pa.string()),
                                 ("image", IMAGE_TYPE)])


def lmms_chartqa(hub_files, records: list[tuple], name: str = "test-00000-of-00001.parquet", fmt: str = "parquet"):
    rows = [{"type": kind, "question": question, "answer": answer,
             "image": {"bytes": hub_files.png() if image is None else image, "path": None}}
            for kind, question, answer, image in records]
    return hub_files.write(pa.Table.from_pylist(rows, schema=LMMS_CHARTQA_SCHEMA), name, fmt)


def test_lmms_chartqa_rows_and_types(hub_files, file_format):
    image = hub_files.png(shade=30)
    path = lmms_chartqa(hub_files, [
        ("human_test", "How many food items are shown in the bar graph?", "14", image),
        ("augmented_test", "What is the value of Lamb?", " 103.7 ", None),
    ], name=f"test.{file_format}", fmt=file_format)

    result = load_chartqa_files([path], split="test")

    assert result.rejected == []
    first, second = result.items
    assert (first.item_id, first.question, first.answers, first.images[0]) == (
        "chartqa-test-0", "How many food items are shown in the bar graph?", ("14",), image)
    assert (second.item_id, second.answers, second.dataset, second.source) == (
        "chartqa-test-1", ("103.7",), "chartqa", str(path))
    assert CHARTQA.question_types([path], "test") == {"chartqa-test-0": "human_test",
                                                      "chartqa-test-1": "augmented_test"}


def test_lmms_chartqa_bad_rows_are_rejected_with_reasons(hub_files):
    path = lmms_chartqa(hub_files, [
        ("human_test", "Fine?", "1", None),
        ("human_test", "Empty answer?", "", None),
        ("human_test", "  ", "2", None),
        ("augmented_test", "Broken image?", "3", b"\x89PNG\r\n\x1a\nxx"),
    ])
    table = pa.Table.from_pylist([{"type": "human_test", "question": "No answer?", "answer": None,
                                   "image": {"bytes": hub_files.png(), "path": None}}], schema=LMMS_CHARTQA_SCHEMA)
    second = hub_files.write(table, "test-00001-of-00001.parquet")

    result = load_chartqa_files([second, path], split="test")

    assert [row.item_id for row in result.items] == ["chartqa-test-0"]
    assert [(row.locator, row.sample_id, row.reason) for row in result.rejected[:2]] == [
        (f"{path}#row=1", "chartqa-test-1", "no answers"),
        (f"{path}#row=2", "chartqa-test-2", "empty question"),
    ]
    corrupt, unanswered = result.rejected[2:]
    assert (corrupt.locator, corrupt.sample_id) == (f"{path}#row=3", "chartqa-test-3")
    assert corrupt.reason.startswith("corrupt image: 10 bytes")
    assert (unanswered.locator, unanswered.sample_id, unanswered.reason) == (
        f"{second}#row=0", "chartqa-test-4", "no answers")
    assert result.records_read == 5


def test_limit_applies_to_rows_and_types_alike(hub_files):
    path = lmms_chartqa(hub_files, [("human_test", f"Q{i}?", str(i), None) for i in range(4)])

    result = load_chartqa_files([path], split="test", limit=2)

    assert [row.item_id for row in result.items] == ["chartqa-test-0", "chartqa-test-1"]
    assert CHARTQA.question_types([path], "test", limit=2) == {"chartqa-test-0": "human_test",
                                                                "chartqa-test-1": "human_test"}


def test_dispatch_by_hub_id_and_by_columns(hub_files):
    lmms = lmms_chartqa(hub_files, [("human_test", "Q?", "7", None)])
    m4 = hub_files.chartqa([hub_files.chartqa_record("Q?", ["7"])])

    assert loader_for("lmms-lab/ChartQA") is LMMS_CHARTQA
    assert CHARTQA.layout_for([lmms]) is LMMS_CHARTQA and CHARTQA.layout_for([m4]) is CHARTQA
    assert load_dataset_files("lmms-lab/ChartQA", [lmms], "test").items[0].answers == ("7",)
    assert load_dataset_files("chartqa", [m4], "val").items[0].answers == ("7",)
    assert CHARTQA.question_types([m4], "val") == {}


def test_lmms_file_without_answer_column_names_it(hub_files):
    table = pa.table({"type": ["human_test"], "question": ["Q?"], "image": [{"bytes": hub_files.png(), "path": None}]})
    path = hub_files.write(table, "no_answer.parquet")

    with pytest.raises(MissingColumnError, match=r"no_answer\.parquet: missing required column 'answer'"):
        load_chartqa_files([path], split="test")


def test_lmms_lab_docvqa_layout_is_read(hub_files):
    # lmms-lab/DocVQA (config DocVQA): questionId string, answers list, docId, question_types list, data_split.
    path = hub_files.docvqa([hub_files.docvqa_record("24581", "What is the date?", ["1/8/93", "January 8, 1993"])])

    result = load_docvqa_files([path], split="validation")

    assert [(row.item_id, row.answers) for row in result.items] == [("docvqa-24581", ("1/8/93", "January 8, 1993"))]
    assert loader_for("lmms-lab/DocVQA").question_types([path], "validation") == {}
