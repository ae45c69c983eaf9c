"""ARC replies read back into grids, and scored: exact match and cell accuracy on hand-checked grids."""

from __future__ import annotations

import doctest

import pytest

import aerorl_ops.text.arc_grids as arc_grids
from aerorl_ops.text.arc_grids import cell_accuracy, grid_scores, grid_text, parse_grid

TARGET = ((1, 2, 3), (4, 5, 6), (7, 8, 9))


@pytest.mark.parametrize("reply", [
    "123\n456\n789",
    "1 2 3\n4 5 6\n7 8 9\n",
    "  1 2 3  \n\t4 5 6\n7 8 9",
    "[1, 2, 3],\n[4, 5, 6],\n[7, 8, 9]",
    "The rule mirrors the grid.\nOutput:\n123\n456\n789\nThat is my answer.",
    "Test input:\n000\n000\n000\nOutput:\n123\n456\n789",  # an echoed input: the last run is the answer
    "```text\n123\n456\n789\n```\nIn words: 3 rows.",  # a fenced block wins over digit lines outside it
])
def test_a_grid_is_read_from_the_forms_a_reply_gives_it_in(reply):
    assert parse_grid(reply) == (TARGET, "")


@pytest.mark.parametrize(("reply", "problem"), [
    ("123\n45\n789", "rows of different lengths (3, 2, 3)"),
    ("I think it is a red square.", "no grid: no line of digits"),
    ("", "no grid: no line of digits"),
    ("1a2\nb34", "no grid: no line of digits"),
])
def test_a_ragged_grid_or_junk_is_no_grid_with_the_reason(reply, problem):
    assert parse_grid(reply) == (None, problem)


def test_the_text_form_reads_back_to_the_same_grid():
    assert grid_text(TARGET) == "123\n456\n789"
    assert parse_grid(grid_text(TARGET)).grid == TARGET


def test_cell_accuracy_is_the_share_of_equal_cells_when_the_shapes_match():
    two_wrong = ((1, 2, 3), (4, 0, 6), (7, 8, 0))
    assert cell_accuracy(two_wrong, TARGET) == pytest.approx(7 / 9, abs=1e-12)
    assert cell_accuracy(TARGET, TARGET) == 1.0
    assert cell_accuracy(((1, 2, 3), (4, 5, 6)), TARGET) == 0.0  # 2x3 against 3x3
    assert cell_accuracy(((1, 2), (4, 5), (7, 8)), TARGET) == 0.0  # 3x2 against 3x3


def test_a_reply_scores_exact_and_cell_accuracy_and_a_non_grid_is_a_parse_failure():
    assert grid_scores("1 2 3\n4 5 6\n7 8 9", "123\n456\n789") == (True, 1.0, True, "123\n456\n789")
    close = grid_scores("123\n406\n780", "123\n456\n789")
    assert (close.exact, close.cell_accuracy, close.parsed) == (False, pytest.approx(7 / 9, abs=1e-12), True)
    assert grid_scores("123\n456", "123\n456\n789") == (False, 0.0, True, "123\n456")
    assert grid_scores("no idea", "123\n456\n789") == (False, 0.0, False, "")
    assert grid_scores("12\n3", "123\n456\n789") == (False, 0.0, False, "")


def test_docstring_examples():
    result = doctest.testmod(arc_grids)
    assert result.attempted > 0 and result.failed == 0
