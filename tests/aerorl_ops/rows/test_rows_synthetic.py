from __future__ import annotations

import datetime as dt
import io

import pytest
from PIL import Image

from aerorl_ops.rows import (
    TaskItem,
    image_sha256,
    synthetic_chartqa_rows,
    synthetic_chartqa_sample,
    synthetic_docvqa_rows,
    synthetic_docvqa_sample,
    validate_item,
)
from aerorl_ops.rows.document_values import amount_value, date_value, random_phone
from aerorl_ops.rows.drawing import font
from aerorl_ops.rows.synthetic_charts import PercentFormat, TenthsFormat
from aerorl_ops.rows.validation import ItemCandidate

GENERATORS = [synthetic_docvqa_rows, synthetic_chartqa_rows]


def test_date_aliases_spell_one_day_three_ways():
    assert date_value(dt.date(2024, 3, 4), style=0).aliases == ("March 4, 2024", "2024-03-04", "4 March 2024")
    assert date_value(dt.date(2024, 3, 4), style=2).aliases == ("4 March 2024", "March 4, 2024", "2024-03-04")


def test_amount_aliases_drop_symbol_then_separator():
    assert amount_value(123_450).aliases == ("$1,234.50", "1,234.50", "1234.50")
    assert amount_value(23_405).aliases == ("$234.05", "234.05")


def test_phone_aliases_are_the_same_number():
    import random

    phone = random_phone(random.Random(0))
    digits = {"".join(ch for ch in alias if ch.isdigit()) for alias in phone.aliases}
    assert len(phone.aliases) == 3 and len(digits) == 1
    assert phone.aliases[0] == phone.shown


def test_chart_number_formats():
    assert PercentFormat().aliases(23) == ("23%", "23")
    assert TenthsFormat().aliases(34) == ("3.4",)
    assert TenthsFormat().aliases(80) == ("8.0", "8")


@pytest.mark.parametrize("generate", GENERATORS)
def test_same_seed_gives_identical_rows_and_png_bytes(generate):
    first, again = generate(6, seed=11), generate(6, seed=11)
    assert first == again
    assert [row.images[0] for row in first] == [row.images[0] for row in again]
    assert generate(3, seed=11) == first[:3]


@pytest.mark.parametrize("generate", GENERATORS)
def test_seed_and_split_change_the_rows(generate):
    base = generate(4, seed=1)
    assert [image_sha256(row.images[0]) for row in generate(4, seed=2)] != [image_sha256(row.images[0]) for row in base]
    test_rows = generate(4, seed=1, split="test")
    assert {row.split for row in test_rows} == {"test"}
    assert not {row.item_id for row in test_rows} & {row.item_id for row in base}


def test_ids_and_sources_name_the_generator():
    (doc,) = synthetic_docvqa_rows(1, seed=5)
    (chart,) = synthetic_chartqa_rows(1, seed=5)
    assert (doc.item_id, doc.dataset, doc.source) == (
        "synthetic_docvqa-validation-s5-00000", "docvqa", "synthetic:documents@seed=5"
    )
    assert (chart.item_id, chart.dataset, chart.source) == (
        "synthetic_chartqa-validation-s5-00000", "chartqa", "synthetic:charts@seed=5"
    )


def test_document_answer_and_evidence_are_drawn_on_the_image():
    for index in range(60):
        sample = synthetic_docvqa_sample(seed=3, index=index)
        row = sample.item
        assert row.answers[0] in sample.drawn_text, row.item_id
        assert set(row.evidence_entities) <= set(sample.drawn_text), row.item_id
        assert row.evidence_entities[0] == row.answers[0]
        assert row.question.endswith("?")


def _shown_number(text: str) -> int:
    """Drawn chart value in display units: '23%' -> 23, '3.4' -> 34 (tenths)."""
    return int(text.removesuffix("%").replace(".", ""))


def test_chart_answers_are_drawn_or_computed_from_drawn_values():
    kinds = set()
    for index in range(60):
        sample = synthetic_chartqa_sample(seed=3, index=index)
        row = sample.item
        assert set(row.evidence_entities) <= set(sample.drawn_text), row.item_id
        if row.question.startswith("What is the difference between"):
            kinds.add("difference")
            _, first_value, _, second_value = row.evidence_entities
            expected = abs(_shown_number(first_value) - _shown_number(second_value))
            assert _shown_number(row.answers[0]) == expected, row.item_id
        else:
            kinds.add("highest/lowest" if "est value" in row.question else "value")
            assert row.answers[0] in sample.drawn_text, row.item_id
    assert kinds == {"difference", "highest/lowest", "value"}


def test_chart_extreme_question_names_the_right_label():
    asked = 0
    for index in range(60):
        sample = synthetic_chartqa_sample(seed=8, index=index)
        row = sample.item
        if "est value?" not in row.question:
            continue
        asked += 1
        # charts draw the title, then every label, then every value in label order
        count = (len(sample.drawn_text) - 1) // 2
        labels, shown = sample.drawn_text[1 : 1 + count], sample.drawn_text[1 + count :]
        pick = max if "highest" in row.question else min
        best_label, best_value = pick(zip(labels, shown, strict=True), key=lambda pair: _shown_number(pair[1]))
        assert row.answers == (best_label,), row.item_id
        assert row.evidence_entities == (best_label, best_value)
    assert asked > 5


def test_images_have_the_promised_size_and_pass_row_checks():
    documents = [(row, (448, 448)) for row in synthetic_docvqa_rows(5, 0)]
    expected = documents + [(row, (448, 336)) for row in synthetic_chartqa_rows(5, 0)]
    for row, size in expected:
        with Image.open(io.BytesIO(row.images[0])) as image:
            assert (image.format, image.mode, image.size) == ("PNG", "RGB", size)
        candidate = ItemCandidate(
            row.item_id, row.dataset, row.split, row.source, row.item_id,
            row.question, row.answers, row.images, evidence_entities=row.evidence_entities,
        )
        assert validate_item(candidate) == row


def test_example_pngs_can_be_saved(tmp_path):
    doc = synthetic_docvqa_rows(1, seed=0)[0]
    chart = synthetic_chartqa_rows(1, seed=0)[0]
    for row in (doc, chart):
        (tmp_path / f"{row.item_id}.png").write_bytes(row.images[0])
    saved = sorted(path.name for path in tmp_path.glob("*.png"))
    assert saved == ["synthetic_chartqa-validation-s0-00000.png", "synthetic_docvqa-validation-s0-00000.png"]
    with Image.open(tmp_path / saved[1]) as image:
        assert image.size == (448, 448)


def test_fonts_below_legible_size_are_refused():
    with pytest.raises(ValueError, match="MIN_TEXT_SIZE"):
        font(12)
    assert font(22).size == 22


def test_negative_count_is_refused():
    with pytest.raises(ValueError, match="count"):
        synthetic_docvqa_rows(-1, seed=0)


@pytest.mark.parametrize("generate", GENERATORS)
def test_hundred_rows_have_unique_ids(generate):
    rows = generate(100, seed=0)
    assert len({row.item_id for row in rows}) == 100
    assert all(isinstance(row, TaskItem) for row in rows)
