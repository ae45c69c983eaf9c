"""Reliability: every bad record a loader reads is rejected with a clear reason, never dropped.

Each case writes a tiny DocVQA-layout Parquet file holding one good record (row 0) and
one bad record (row 1), loads it, and checks the exact rejection.
"""

from __future__ import annotations

import io
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from aerorl_ops.rows import (
    DEFAULT_CHECKS,
    MAX_ALIAS_CHARS,
    MAX_IMAGE_PIXELS,
    MAX_QUESTION_CHARS,
    ItemCandidate,
    RowChecks,
    load_chartqa_files,
    load_docvqa_files,
    validate_item,
)

IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
STRING, STRING_LIST = pa.string(), pa.list_(pa.string())


def encoded(width: int = 8, height: int = 6, fmt: str = "PNG", mode: str = "RGB") -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, (width, height), 128 if mode == "1" else (90, 90, 90)).save(buffer, format=fmt)
    return buffer.getvalue()


def noisy(fmt: str) -> bytes:
    rng = random.Random(0)
    image = Image.frombytes("RGB", (64, 64), bytes(rng.randrange(256) for _ in range(64 * 64 * 3)))
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def record(**overrides) -> dict:
    base = {"questionId": "100", "question": "What is the date?", "answers": ["May 1"], "image": encoded()}
    return {**base, **overrides}


def write_docvqa(
    path: Path, records: list[dict], question_type: pa.DataType = STRING, answers_type: pa.DataType = STRING_LIST
) -> Path:
    table = pa.table(
        {
            "questionId": pa.array([r["questionId"] for r in records], pa.string()),
            "question": pa.array([r["question"] for r in records], question_type),
            "image": pa.array(
                [None if r["image"] is None else {"bytes": r["image"], "path": None} for r in records], IMAGE_TYPE
            ),
            "answers": pa.array([r["answers"] for r in records], answers_type),
        }
    )
    pq.write_table(table, path)
    return path


def reject_second(tmp_path: Path, bad: dict, checks: RowChecks = DEFAULT_CHECKS, **types) -> str:
    """Load [good, bad]; assert the good row is kept and the bad one rejected; return the reason."""
    path = write_docvqa(tmp_path / "validation.parquet", [record(questionId="1"), bad], **types)
    result = load_docvqa_files([path], split="validation", checks=checks)
    assert [row.item_id for row in result.items] == ["docvqa-1"]
    (rejected,) = result.rejected
    assert (rejected.source, rejected.locator) == (str(path), f"{path}#row=1")
    assert rejected.sample_id == (f"docvqa-{bad['questionId']}" if bad["questionId"] else None)
    return rejected.reason


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (record(image=b"definitely not an image"), "corrupt image: 23 bytes in no format PIL recognises"),
        (record(image=noisy("PNG")[:-12]), "corrupt image: OSError: truncated PNG file"),
        (record(image=None), "missing image bytes"),
        (record(image=b""), "missing image bytes"),
        (record(question=None), "missing question"),
        (record(question=" \n "), "empty question"),
        (record(answers=[]), "no answers"),
        (record(answers=None), "no answers"),
        (record(answers=["", "  ", None]), "no answers"),
        (record(question="x" * (MAX_QUESTION_CHARS + 1)), "question too long: 4097 chars > 4096"),
        (record(answers=["ok", "y" * (MAX_ALIAS_CHARS + 1)]), "answer alias 1 too long: 1025 chars > 1024"),
        (record(questionId=None), "missing sample id"),
    ],
)
def test_bad_record_is_rejected_with_reason(tmp_path, bad, reason):
    assert reject_second(tmp_path, bad) == reason


def test_truncated_jpeg_passes_verify_but_fails_full_decode(tmp_path):
    jpeg = noisy("JPEG")
    reason = reject_second(tmp_path, record(image=jpeg[: len(jpeg) // 2]))
    assert reason.startswith("truncated or undecodable image: OSError: image file is truncated")


def test_invalid_utf8_in_a_bytes_question_column(tmp_path):
    bad = record(question=b"Total \xff\xfe due?")
    reason = reject_second(tmp_path, bad, question_type=pa.binary())
    assert reason == "question is not valid UTF-8 (invalid start byte at byte 6)"


def test_invalid_utf8_inside_a_string_column(tmp_path):
    # Parquet stores whatever bytes a writer gives it; build such a string column by hand.
    good, bad = b"What is the date?", b"Wh\xc3at?"
    offsets = pa.py_buffer(pa.array([0, len(good), len(good) + len(bad)], pa.int32()).buffers()[1])
    question = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(good + bad)])
    table = pa.table(
        {
            "questionId": ["1", "2"],
            "question": question,
            "image": pa.array([{"bytes": encoded(), "path": None}] * 2, IMAGE_TYPE),
            "answers": [["a"], ["b"]],
        }
    )
    path = tmp_path / "validation.parquet"
    pq.write_table(table, path)

    result = load_docvqa_files([path], split="validation")

    assert [row.item_id for row in result.items] == ["docvqa-1"]
    assert [(r.sample_id, r.reason) for r in result.rejected] == [
        ("docvqa-2", "question is not valid UTF-8 (invalid continuation byte at byte 2)")
    ]


def test_invalid_utf8_in_an_answer_alias(tmp_path):
    bad = record(answers=[b"fine", b"caf\xe9"])
    reason = reject_second(tmp_path, bad, answers_type=pa.list_(pa.binary()))
    assert reason == "answer alias 1 is not valid UTF-8 (unexpected end of data at byte 3)"


def test_image_over_the_pixel_limit(tmp_path):
    reason = reject_second(tmp_path, record(image=encoded(11, 10)), checks=RowChecks(max_image_pixels=100))
    assert reason == "image too large: 11x10 = 110 pixels > limit 100"


def test_default_pixel_limit_rejects_from_the_header(tmp_path):
    huge = encoded(6001, 6000, mode="1")  # a 36,006,000-pixel bilevel PNG is only a few KB
    reason = reject_second(tmp_path, record(image=huge))
    assert reason == f"image too large: 6001x6000 = 36006000 pixels > limit {MAX_IMAGE_PIXELS}"


def test_limits_are_inclusive():
    candidate = ItemCandidate(
        "s", "docvqa", "validation", "src", "src#row=0",
        question="q" * MAX_QUESTION_CHARS, answers=["a" * MAX_ALIAS_CHARS], images=[encoded(10, 10)],
    )
    row = validate_item(candidate, RowChecks(max_image_pixels=100))
    assert (len(row.question), len(row.answers[0])) == (4096, 1024)


def test_chartqa_rejection_names_row_and_index_id(tmp_path):
    table = pa.table(
        {
            "image": pa.array(
                [{"bytes": encoded(), "path": None}, {"bytes": b"\x89PNG junk", "path": None}], IMAGE_TYPE
            ),
            "query": ["Which bar is tallest?", "What is the value for 2019?"],
            "label": [["Apples"], ["12"]],
            "human_or_machine": [0, 1],
        }
    )
    path = tmp_path / "val-00000-of-00001.parquet"
    pq.write_table(table, path)

    result = load_chartqa_files([path], split="val")

    assert [row.item_id for row in result.items] == ["chartqa-val-0"]
    assert [(r.sample_id, r.locator) for r in result.rejected] == [("chartqa-val-1", f"{path}#row=1")]
    assert result.rejected[0].reason.startswith("corrupt image")


def test_rows_in_equal_accepted_plus_rejected(tmp_path):
    records = [
        record(questionId="1"),
        record(questionId="2", image=b"junk"),
        record(questionId="3", question=""),
        record(questionId="4", answers=[]),
        record(questionId="5", answers=["a", "a", " b"]),
        record(questionId="5"),
        record(questionId=None),
    ]
    path = write_docvqa(tmp_path / "mixed.parquet", records)

    result = load_docvqa_files([path], split="validation")

    assert result.records_read == len(records)
    assert [row.item_id for row in result.items] == ["docvqa-1", "docvqa-5"]
    assert result.items[1].answers == ("a", "b")
    assert [(r.locator.rsplit("#", 1)[1], r.reason.split(":")[0].split(" (")[0]) for r in result.rejected] == [
        ("row=1", "corrupt image"),
        ("row=2", "empty question"),
        ("row=3", "no answers"),
        ("row=5", "duplicate sample id"),
        ("row=6", "missing sample id"),
    ]
