"""The fixed text the embedded default's byte-level BPE tokenizer is trained on.

It covers what the embedded benchmark says and expects: the system prompt, the answer-format
instruction, JSON answers, document fields (dates, money, phone numbers, names) and chart
vocabulary, and short-answer VQA: the questions and every answer word of easy-VQA-style tasks
(colours, shapes, yes/no). Each answer word appears often enough, at the start of a line and
after a space, that BPE learns it as one whole token in both positions, so a one-word answer is
one token (plus EOS). Byte-level BPE can encode any text; this corpus only decides which merges
exist.
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
_ANSWER_WORDS = (
    "yes no circle rectangle triangle square red green blue yellow black white gray grey teal brown orange "
    "purple pink true false left right top bottom one two three four five"
).split()
_VQA_QUESTIONS = (
    "what color is the shape?", "what is the color of the shape?", "what shape is in the image?",
    "what shape does the image contain?", "what shape is present?", "is there a shape in the image?",
    "does the image contain a shape?", "does the image not contain a shape?", "is there not a shape?",
    "is no shape present?", "how many shapes are there?", "which side is it on?",
)
ANSWER_WORD_REPEATS = 40
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
    for _ in range(ANSWER_WORD_REPEATS):
        lines.extend(_ANSWER_WORDS)  # the word at the start of a reply
        lines.append("a " + " ".join(_ANSWER_WORDS))  # and after a space, inside a sentence
        lines.extend(_VQA_QUESTIONS)
    return lines
