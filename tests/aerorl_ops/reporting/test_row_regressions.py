"""Per-row comparison of two benchmark runs (``reporting.row_regressions``), on hand-checkable rows."""

from __future__ import annotations

import math

import pytest

from aerorl_ops.reporting.row_regressions import (
    RowOutcome,
    compare_rows,
    mcnemar_exact_p,
    paired_bootstrap_interval,
)


@pytest.mark.parametrize(("lost", "gained", "expected"), [
    (0, 0, 1.0),
    (3, 0, 2 / 8),  # 2 * P[X <= 0], X ~ Bin(3, 1/2)
    (6, 0, 2 / 64),
    (7, 0, 2 / 128),
    (5, 1, 2 * (1 + 6) / 64),  # 2 * P[X <= 1], X ~ Bin(6, 1/2)
    (1, 5, 2 * (1 + 6) / 64),  # two-sided: symmetric
    (10, 10, 1.0),  # 2 * P[X <= 10] > 1 is capped
    (2, 9, 2 * (1 + 11 + 55) / 2048),
])
def test_mcnemar_exact_p_is_the_two_sided_binomial_tail_of_the_discordant_rows(lost, gained, expected):
    assert mcnemar_exact_p(lost, gained) == pytest.approx(expected, rel=1e-12)


def test_mcnemar_rejects_negative_counts():
    with pytest.raises(ValueError, match="lost=-1"):
        mcnemar_exact_p(-1, 2)


def test_the_bootstrap_interval_of_constant_differences_is_that_constant_and_brackets_the_mean():
    assert paired_bootstrap_interval([0.5, 0.5, 0.5, 0.5]) == (0.5, 0.5)
    assert paired_bootstrap_interval([]) == (0.0, 0.0)
    differences = [-1.0] * 30 + [0.0] * 70  # mean -0.3, standard error ~0.046
    low, high = paired_bootstrap_interval(differences)
    assert low < -0.3 < high and high < 0  # clearly below zero
    assert high - low == pytest.approx(2 * 1.96 * math.sqrt(0.21 / 100), rel=0.15)
    assert paired_bootstrap_interval(differences) == (low, high)  # seeded: the same interval every time


def test_rows_are_matched_by_sample_id_and_each_change_is_named():
    before = {"a": RowOutcome(True, 1.0, "12"), "b": RowOutcome(False, 0.0, "7"), "c": RowOutcome(False, 0.0, "x"),
              "d": RowOutcome(True, 1.0, "yes"), "gone": RowOutcome(True, 1.0, "1")}
    after = {"a": RowOutcome(False, 0.25, "13"), "b": RowOutcome(True, 1.0, "8"), "c": RowOutcome(False, 0.0, "y"),
             "d": RowOutcome(True, 1.0, "yes"), "new": RowOutcome(False, 0.0, "2")}
    comparison = compare_rows(before, after)
    assert (comparison.rows, comparison.unmatched, comparison.lost, comparison.gained) == (4, 2, 1, 1)
    assert [(row.sample_id, row.change) for row in comparison.changed] == [("a", "lost"), ("b", "gained"),
                                                                           ("c", "text")]
    assert comparison.changed_text == 3
    assert comparison.mean_score_difference == pytest.approx((-0.75 + 1.0 + 0.0 + 0.0) / 4, abs=1e-15)
    assert comparison.p_value == 1.0 and not comparison.significant_drop()


def test_a_drop_is_significant_only_when_more_rows_are_lost_than_gained_below_alpha():
    right, wrong = RowOutcome(True, 1.0, "r"), RowOutcome(False, 0.0, "w")
    seven_lost = compare_rows({str(k): right for k in range(10)},
                              {str(k): wrong if k < 7 else right for k in range(10)})
    assert seven_lost.p_value == pytest.approx(2 / 128) and seven_lost.significant_drop()
    assert not seven_lost.significant_drop(alpha=0.01)
    seven_gained = compare_rows({str(k): wrong for k in range(10)}, {str(k): right if k < 7 else wrong
                                                                     for k in range(10)})
    assert seven_gained.p_value == pytest.approx(2 / 128) and not seven_gained.significant_drop()
    same = compare_rows({"a": right, "b": wrong}, {"a": right, "b": wrong})
    assert (same.changed, same.p_value, same.mean_score_difference, same.interval) == ((), 1.0, 0.0, (0.0, 0.0))
