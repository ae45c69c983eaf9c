"""ANLS and relaxed accuracy: lmms-eval's per-sample scores, edge cases included."""

from __future__ import annotations

import pytest

from aerorl_ops.metrics import anls, relaxed_accuracy


def test_anls_exact_after_normalisation():
    assert anls("  Paris\tFRANCE ", ["paris france"]) == 1.0


def test_anls_similarity_of_exactly_half_is_kept():
    assert anls("abcd", ["abef"]) == 0.5  # distance 2 over length 4


def test_anls_below_threshold_is_zero():
    assert anls("abcde", ["abxyz"]) == 0.0  # 1 - 3/5 = 0.4
    assert anls("abcd", ["abef"], threshold=0.6) == 0.0


def test_anls_divides_by_the_raw_length_as_lmms_eval_does():
    # normalised "abc" vs "abd": distance 1; raw lengths 6 and 3 -> 1 - 1/6
    assert anls("abc   ", ["abd"]) == 0.8333333333333334


def test_anls_best_reference_wins():
    assert anls("Pariss", ["London", "Paris"]) == 0.8333333333333334
    assert anls("x", "x") == 1.0  # a single reference string


def test_anls_empty_prediction_and_reference():
    assert anls("", [""]) == 1.0
    assert anls("", ["abc"]) == 0.0


def test_anls_needs_a_reference():
    with pytest.raises(ValueError, match="at least one reference"):
        anls("x", [])


@pytest.mark.parametrize(
    ("prediction", "target", "expected"),
    [
        ("10.5", "10", 1.0),  # exactly 5% off
        ("10.51", "10", 0.0),
        ("9.5", "10", 1.0),
        ("-10.4", "-10", 1.0),
        ("12%", "12", 0.0),  # 0.12 vs 12
        ("0.12", "12%", 1.0),  # 12% reads as 0.12
        ("12%", "12%", 1.0),
        ("1,234", "1234", 0.0),  # not a float: string comparison
        ("1,234", "1,234", 1.0),
        ("0.0", "0", 0.0),  # a zero target compares strings
        ("0", "0", 1.0),
        (" 12 ", "12", 1.0),  # float() allows surrounding spaces
        ("Yes", "yes", 1.0),
        ("no", "yes", 0.0),
        ("nan", "nan", 0.0),  # NaN is never within tolerance
        ("", "", 1.0),
    ],
)
def test_relaxed_accuracy(prediction, target, expected):
    assert relaxed_accuracy(prediction, target) == expected


def test_relaxed_accuracy_tolerance_parameter():
    assert relaxed_accuracy("11", "10", tolerance=0.1) == 1.0
    assert relaxed_accuracy("11", "10") == 0.0
