"""ARC grids as text: the answer's form, a reply read back into a grid, and the reply's scores.

An ARC grid is a rectangle of digits 0-9 (one colour each). Its text form, the answer an ARC item
expects, is one line per row with the row's digits side by side (:func:`grid_text`).

A reply is read by :func:`parse_grid`. When it holds a fenced code block, the last block is read; the
grid is then the last run of consecutive lines that hold only digits once spaces, tabs, commas and
square brackets are taken out, so ``0 1``, ``[0, 1],`` and ``01`` read alike and prose lines before
or after the grid are skipped. Rows of different lengths, or no digit line at all, make no grid: such a
reply scores 0 and counts as a parse failure (never an exception).

:func:`grid_scores` scores a reply against the answer's text: ``exact`` when the grids are equal (ARC's
own metric) and ``cell_accuracy``, the share of equal cells when the shapes match, else 0.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

Grid = tuple[tuple[int, ...], ...]
"""A grid read back from text: its rows, top to bottom, each a tuple of digits."""

_FENCED = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
_DIGITS = re.compile(r"[0-9]+")
_ROW_NOISE = str.maketrans("", "", " \t,[]")


def grid_text(grid: Sequence[Sequence[int]]) -> str:
    """The text form of a grid: one line per row, its digits side by side.

    >>> grid_text(((0, 1, 2), (3, 4, 5)))
    '012\\n345'
    """
    return "\n".join("".join(str(int(cell)) for cell in row) for row in grid)


class ParsedGrid(NamedTuple):
    """A reply read as a grid: ``grid`` is None when it holds none, and ``problem`` then says why."""

    grid: Grid | None
    problem: str = ""


def _digit_runs(text: str) -> list[list[str]]:
    runs: list[list[str]] = []
    current: list[str] = []
    for line in text.splitlines():
        row = line.translate(_ROW_NOISE)
        if _DIGITS.fullmatch(row):
            current.append(row)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


def parse_grid(reply: str) -> ParsedGrid:
    """The grid a reply gives (see the module docstring), or None with the reason.

    >>> parse_grid("The output is:\\n0 1 2\\n3 4 5\\nDone.").grid
    ((0, 1, 2), (3, 4, 5))
    >>> parse_grid("```\\n[1, 0],\\n[0, 1]\\n```").grid
    ((1, 0), (0, 1))
    >>> parse_grid("012\\n34").problem, parse_grid("a red square").problem, parse_grid("012\\n34").grid
    ('rows of different lengths (3, 2)', 'no grid: no line of digits', None)
    """
    blocks = _FENCED.findall(reply)
    runs = _digit_runs(blocks[-1] if blocks else reply)
    if not runs:
        return ParsedGrid(None, "no grid: no line of digits")
    rows = runs[-1]
    lengths = [len(row) for row in rows]
    if len(set(lengths)) > 1:
        return ParsedGrid(None, f"rows of different lengths ({', '.join(map(str, lengths))})")
    return ParsedGrid(tuple(tuple(int(cell) for cell in row) for row in rows))


def cell_accuracy(predicted: Grid, target: Grid) -> float:
    """The share of cells equal in both grids when their shapes match, else 0.0.

    >>> cell_accuracy(((1, 2), (3, 4)), ((1, 2), (3, 0))), cell_accuracy(((1, 2),), ((1, 2), (3, 4)))
    (0.75, 0.0)
    """
    if len(predicted) != len(target) or any(len(p) != len(t) for p, t in zip(predicted, target, strict=True)):
        return 0.0
    pairs = [(a, b) for predicted_row, target_row in zip(predicted, target, strict=True)
             for a, b in zip(predicted_row, target_row, strict=True)]
    return sum(a == b for a, b in pairs) / len(pairs) if pairs else 0.0


class GridScore(NamedTuple):
    """A reply scored against an answer grid: ``parsed`` False is a parse failure (the scores are then 0);
    ``prediction`` is the parsed grid's text ("" when none)."""

    exact: bool
    cell_accuracy: float
    parsed: bool
    prediction: str


def grid_scores(reply: str, answer: str) -> GridScore:
    """Exact match and cell accuracy of ``reply`` against ``answer`` (a grid's text form).

    >>> grid_scores("01\\n11", "01\\n10"), grid_scores("0 1\\n1 0", "01\\n10").exact
    (GridScore(exact=False, cell_accuracy=0.75, parsed=True, prediction='01\\n11'), True)
    >>> grid_scores("I do not know", "01\\n10")
    GridScore(exact=False, cell_accuracy=0.0, parsed=False, prediction='')
    """
    predicted = parse_grid(reply).grid
    target = parse_grid(answer).grid
    if predicted is None:
        return GridScore(False, 0.0, False, "")
    accuracy = cell_accuracy(predicted, target) if target is not None else 0.0
    return GridScore(predicted == target, accuracy, True, grid_text(predicted))
