"""One check for every loader's records (``rows.validation.validate_item``): a record becomes a task item with
every field it brought, or a rejection naming what is wrong, a later image by its position."""

from __future__ import annotations

import doctest
import io
import warnings

from PIL import Image

import aerorl_ops.rows.load_result as load_result
from aerorl_ops.rows import ItemCandidate, RejectedRow, TaskItem, validate_item
from aerorl_ops.rows.validation import image_problem

TURN = {"role": "user", "content": [{"type": "image"}, {"type": "image"}, {"type": "text", "text": "Same shape?"}]}


def png(colour: str) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), colour).save(buffer, format="PNG")
    return buffer.getvalue()


def candidate(*images: bytes | None) -> ItemCandidate:
    return ItemCandidate("pair-1", "pairs", "test", "pairs.jsonl", "pairs.jsonl#line=3", b" Same shape? ",
                         ["yes", None, "yes", " Yes "], list(images), [TURN], question_type="yes_no")


def test_a_record_with_two_good_images_becomes_an_item_with_both_and_its_messages():
    red, blue = png("red"), png("blue")
    assert validate_item(candidate(red, blue)) == TaskItem(
        "pair-1", "pairs", "test", "pairs.jsonl", "Same shape?", ("yes", "Yes"), (red, blue), (TURN,), "yes_no",
        ("yes", "Yes"))


def test_a_bad_later_image_is_rejected_by_its_position():
    missing = validate_item(candidate(png("red"), None))
    corrupt = validate_item(candidate(png("red"), png("blue"), b"not a png"))
    assert missing == RejectedRow("pairs.jsonl", "pairs.jsonl#line=3", "pair-1", "image 1: missing image bytes")
    assert isinstance(corrupt, RejectedRow)
    assert corrupt.reason == "image 2: corrupt image: 9 bytes in no format PIL recognises"


def test_the_first_image_and_the_id_are_checked_as_a_rows_record_is():
    assert validate_item(candidate()).reason == "missing image bytes"
    nameless = validate_item(ItemCandidate(None, "pairs", "test", "pairs.jsonl", "pairs.jsonl#line=4", "Q?", ["a"],
                                           [png("red")]))
    assert (nameless.sample_id, nameless.reason) == (None, "missing sample id")


def test_a_rejection_is_one_printable_line_and_never_holds_an_id_it_cannot_store():
    # found by fuzzing: an image path holding "\r" made a two-line reason; a JSON "\ud800" id made a rejected_rows
    # row that Arrow could not write
    row = RejectedRow("f.jsonl", "f.jsonl#line=2", "q\ud800", "image file not found: /data/a\r\nb\u2028.png\x00")
    assert (row.sample_id, row.reason) == (None, "image file not found: /data/a\\r\\nb\\u2028.png\\x00")
    assert RejectedRow("f", "f#1", "ünï", "no answers").sample_id == "ünï"
    result = doctest.testmod(load_result)
    assert result.failed == 0 and result.attempted > 0


def test_a_damaged_tiff_is_rejected_without_pil_warning_about_it():
    # found by fuzzing: PIL's "Truncated File Read" warning reached stderr beside the rejection
    buffer = io.BytesIO()
    Image.new("RGB", (12, 12), "gray").save(buffer, format="TIFF")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        problem = image_problem(buffer.getvalue()[:131])
    assert (problem, caught) == ("corrupt image: 131 bytes in no format PIL recognises", [])
