"""Exact match after normalisation: how easy-VQA and user JSONL / Parquet answers are judged.

The graded answer is read from the reply in this order: the last ``\\boxed{...}`` (MAYE's and
verl's math answer form), else the ``answer`` of a ``{"answer": ...}`` JSON reply, else the
whole reply. Answer and aliases are then lower-cased, whitespace runs collapsed, and
punctuation and whitespace stripped from both ends. Two texts that both read as numbers
match when the numbers are equal (``"20"`` and ``"20.0"``).
"""

from __future__ import annotations

import math
import string
from collections.abc import Iterable

from aerorl_ops.text.answers import extract_answer

_EDGE_CHARACTERS = string.punctuation + string.whitespace
_BOXED = "\\boxed{"


def last_boxed(text: str) -> str | None:
    """The contents of the last ``\\boxed{...}`` in ``text`` (nested braces kept), or None.

    >>> last_boxed(r"so \\boxed{1} or rather \\boxed{\\frac{1}{2}}.")
    '\\\\frac{1}{2}'
    >>> last_boxed("no box"), last_boxed(r"\\boxed{unclosed")
    (None, None)
    """
    start = text.rfind(_BOXED)
    if start < 0:
        return None
    depth = 1
    position = start + len(_BOXED)
    for index in range(position, len(text)):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            depth -= 1
            if depth == 0:
                return text[position:index]
    return None


def predicted_answer(reply: str) -> str:
    """The answer a reply gives: boxed, else JSON ``answer``, else the whole reply.

    >>> predicted_answer(r"It is \\boxed{20}"), predicted_answer('{"answer": "Red"}'), predicted_answer(" red ")
    ('20', 'Red', ' red ')
    """
    boxed = last_boxed(reply)
    if boxed is not None:
        return boxed
    answer = extract_answer(reply)
    return reply if answer is None else answer


def normalize_answer(text: str) -> str:
    """Lower-case, collapse whitespace, strip punctuation and whitespace from both ends.

    >>> normalize_answer("  Rectangle. "), normalize_answer('"Light  Blue"!'), normalize_answer("3.5")
    ('rectangle', 'light blue', '3.5')
    """
    return " ".join(text.lower().split()).strip(_EDGE_CHARACTERS)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def answers_match(prediction: str, aliases: Iterable[str]) -> bool:
    """Whether the normalised prediction equals a normalised alias (numbers compared as numbers).

    >>> answers_match("Yes.", ["yes"]), answers_match("20.0", ["20"]), answers_match("no", ["yes"])
    (True, True, False)
    """
    predicted = normalize_answer(prediction)
    predicted_number = _number(predicted)
    for alias in aliases:
        expected = normalize_answer(alias)
        if predicted == expected:
            return True
        expected_number = _number(expected)
        if predicted_number is not None and expected_number is not None and predicted_number == expected_number:
            return True
    return False
