"""The fixed text the embedded default's byte-level BPE tokenizer is trained on.

It covers what the embedded benchmark says and expects: the system prompt, the answer-format
instruction, JSON answers, document fields (dates, money, phone numbers, names) and chart
vocabulary. Byte-level BPE can encode any text; this corpus only decides which merges exist.
"""

from __future__ import annotations

import itertools

_MONTHS = (
    "January February March April May June July August September October November December"
).split()
_WORDS = (
    "You are a helpful assistant. Answer the question about the image. Reply with strict JSON "
    'of the form {"answer": "..."} and nothing else. What is the invoice date? What is the total '
    "amount due? Who is the sender? What is the phone number? What is the value for the category? "
    "Which category has the highest value? Which year has the lowest value? What is the difference "
    "between the two values? What percentage of the total does it represent? Invoice Receipt Letter "
    "Form Date Total Amount Due Sender Phone From To Bill Account Number Chart Sales Revenue Share "
    "Growth Year Quarter Value Percent Category North South East West Apples Oranges Bananas"
).split()
_NAMES = "Alice Johnson Bob Smith Carla Diaz Deepak Rao Emma Brown Farid Khan Grace Lee Hiro Tanaka".split()


def tokenizer_training_corpus() -> list[str]:
    """Deterministic list of training sentences (same list on every call and machine)."""
    lines: list[str] = [" ".join(_WORDS)]
    for month, day, year in itertools.product(_MONTHS, (1, 4, 12, 23, 30), (2019, 2023, 2024)):
        lines.append(f"{month} {day}, {year}")
        lines.append(f"{year}-{_MONTHS.index(month) + 1:02d}-{day:02d}")
    for amount in range(0, 10_000, 37):
        lines.append(f'{{"answer": "${amount:,}.{amount % 100:02d}"}}')
        lines.append(f'{{"answer": "{amount}"}} {amount % 100}%')
    for first, last in itertools.pairwise(_NAMES):
        lines.append(f'{{"answer": "{first} {last}"}}')
    for number in range(100, 1000, 53):
        lines.append(f"({number}) {number + 11}-{number * 7 % 10_000:04d}")
    return lines
