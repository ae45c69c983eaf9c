"""Deterministic DocVQA-like rows: rendered invoices, letters and forms with one question each.

Each row's image is a 448x448 white page with dark text (fields at 22 px, body at 20 px,
title at 28 px, Pillow's bundled scalable font). The question asks for one field's value;
``answers[0]`` is that value exactly as drawn, followed by other spellings of it (dates in
three formats, amounts with and without ``$`` and thousands separators, phone numbers in
three formats). ``evidence_entities`` is ``(value as drawn, its label as drawn)``.

Row ``i`` depends only on ``(split, seed, i)``, so the first ``n`` rows of a longer run are
the same rows, byte for byte, as a run with ``count=n``.
"""

from __future__ import annotations

import datetime as dt
import random

from aerorl_ops.rows import document_values as values
from aerorl_ops.rows.document_layout import Block, Field, ItemLine, Rule, TextLine, Title, render_blocks
from aerorl_ops.rows.synthetic_sample import SyntheticSample
from aerorl_ops.rows.task_item import TaskItem

DATASET = "docvqa"
GENERATOR = "documents"

LETTER_BODIES = (
    ("Please find the signed contract", "enclosed with this letter."),
    ("Thank you for your order. It will", "ship within five working days."),
    ("Our office will be closed on the", "public holiday next month."),
    ("We confirm your booking for the", "annual meeting in our offices."),
)
SUBJECTS = ("Contract renewal", "Order confirmation", "Office closure", "Meeting booking")


class InvoiceTemplate:
    def blocks(self, rng: random.Random) -> tuple[Block, ...]:
        style = rng.randrange(values.DATE_STYLES)
        issued = values.random_day(rng)
        items = rng.sample(values.ITEMS, rng.randint(2, 3))
        item_cents = [rng.randint(500, 300_000) for _ in items]
        return (
            Title("INVOICE"),
            TextLine(values.random_company(rng)),
            TextLine(values.random_address(rng)),
            Rule(),
            Field("Invoice no:", values.random_reference(rng, "INV"), "What is the invoice number?"),
            Field("Invoice date:", values.date_value(issued, style), "What is the invoice date?"),
            Field("Due date:", values.date_value(issued + dt.timedelta(days=30), style), "What is the due date?"),
            Field("Bill to:", values.random_person(rng), "Who is the invoice billed to?"),
            Field("Phone:", values.random_phone(rng), "What is the phone number?"),
            Rule(),
            *(ItemLine(item, values.amount_value(cents).shown) for item, cents in zip(items, item_cents, strict=True)),
            Rule(),
            Field("Total amount due:", values.amount_value(sum(item_cents)), "What is the total amount due?"),
        )


class LetterTemplate:
    def blocks(self, rng: random.Random) -> tuple[Block, ...]:
        sender, recipient = values.random_person(rng), values.random_person(rng)
        while recipient.shown == sender.shown:
            recipient = values.random_person(rng)
        topic = rng.randrange(len(SUBJECTS))
        return (
            Title(values.random_company(rng), size=26),
            TextLine(values.random_address(rng)),
            Rule(),
            Field("Date:", values.random_date(rng), "What is the date of the letter?"),
            Field("From:", sender, "Who is the sender?"),
            Field("To:", recipient, "Who is the letter addressed to?"),
            Field("Phone:", values.random_phone(rng), "What is the phone number?"),
            Field("Subject:", values.FieldValue.of(SUBJECTS[topic])),
            Rule(),
            TextLine(f"Dear {recipient.shown.split()[0]},"),
            *(TextLine(line) for line in LETTER_BODIES[topic]),
            TextLine("Sincerely,"),
            TextLine(sender.shown),
        )


class FormTemplate:
    def blocks(self, rng: random.Random) -> tuple[Block, ...]:
        return (
            Title(rng.choice(("EXPENSE CLAIM FORM", "REIMBURSEMENT FORM")), size=26),
            TextLine(values.random_company(rng)),
            Rule(),
            Field("Name:", values.random_person(rng), "What is the name on the form?", underline=True),
            Field("Employee ID:", values.random_reference(rng, "EMP"), "What is the employee ID?", underline=True),
            Field("Date submitted:", values.random_date(rng), "When was the form submitted?", underline=True),
            Field("Phone:", values.random_phone(rng), "What is the phone number?", underline=True),
            Field(
                "Amount claimed:", values.random_amount(rng, high_cents=500_000), "What is the amount claimed?",
                underline=True,
            ),
            Rule(),
            TextLine("I confirm these expenses were"),
            TextLine("incurred for company business."),
        )


TEMPLATES = (InvoiceTemplate(), LetterTemplate(), FormTemplate())


def synthetic_docvqa_sample(seed: int, index: int, split: str = "validation") -> SyntheticSample:
    """Row ``index`` of the document set for ``(seed, split)``, with its drawn strings."""
    rng = random.Random(f"{GENERATOR}:{split}:{seed}:{index}")
    blocks = rng.choice(TEMPLATES).blocks(rng)
    field = rng.choice([block for block in blocks if isinstance(block, Field) and block.question])
    rendered = render_blocks(blocks)
    item = TaskItem(
        item_id=f"synthetic_{DATASET}-{split}-s{seed}-{index:05d}",
        dataset=DATASET,
        split=split,
        question=field.question,
        answers=field.value.aliases,
        images=(rendered.png,),
        source=f"synthetic:{GENERATOR}@seed={seed}",
        evidence_entities=(field.value.shown, field.label),
    )
    return SyntheticSample(item=item, drawn_text=rendered.drawn_text)


def synthetic_docvqa_rows(count: int, seed: int, split: str = "validation") -> list[TaskItem]:
    """``count`` deterministic document rows; same ``(count, seed, split)`` gives identical bytes.

    >>> rows = synthetic_docvqa_rows(2, seed=0)
    >>> rows[0].item_id, rows[0].answers[0] in rows[0].answers
    ('synthetic_docvqa-validation-s0-00000', True)
    """
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    return [synthetic_docvqa_sample(seed, index, split).item for index in range(count)]
