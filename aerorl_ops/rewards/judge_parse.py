"""How a judge's reply becomes a grade: the one rule, documented once.

The grade is the FIRST number in the reply: digits with an optional fractional part (``7``,
``7.5``), a minus sign kept (``-2``), an ``/10`` after it allowed (``7/10``). It must lie in
[0, 10]; the score is that number divided by 10, so it lies in [0, 1]. A reply with no number,
or whose first number is below 0 or above 10, is unparsable (the judge reward scores it with
``failure_score`` and counts it).
"""

from __future__ import annotations

import re

GRADE_SCALE = 10.0
_FIRST_NUMBER = re.compile(r"(?<![\d.])-?\d+(?:\.\d+)?")


def parse_grade(reply: str) -> float | None:
    """The score in [0, 1] a judge's reply gives, or None when it is unparsable.

    >>> parse_grade("8"), parse_grade("Grade: 7/10."), parse_grade(" 10 - perfect"), parse_grade("2.5 of 10")
    (0.8, 0.7, 1.0, 0.25)
    >>> parse_grade("yes"), parse_grade("11"), parse_grade("-1"), parse_grade("")
    (None, None, None, None)
    """
    match = _FIRST_NUMBER.search(reply)
    if match is None:
        return None
    value = float(match.group())
    if not 0.0 <= value <= GRADE_SCALE:
        return None
    return value / GRADE_SCALE
