"""The unbiased pass@k estimator against hand-computed and exact rational values."""

from __future__ import annotations

from fractions import Fraction
from math import comb

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aerorl_ops.eval_metrics.pass_at_k import (
    mean_pass_at_k,
    pass_at_k,
    pass_at_k_per_question,
)


def exact_pass_at_k(n: int, c: int, k: int) -> float:
    return float(1 - Fraction(comb(n - c, k), comb(n, k)))


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (8, 0, 1, 0.0),  # c = 0: never right
        (8, 0, 8, 0.0),
        (8, 8, 1, 1.0),  # c = n: always right
        (8, 8, 8, 1.0),
        (8, 3, 1, 3 / 8),  # k = 1: c / n
        (10, 7, 1, 7 / 10),
        (8, 1, 8, 1.0),  # k = n: any correct sample
        (5, 2, 2, 1 - 3 / 10),  # 1 - C(3, 2) / C(5, 2)
        (10, 3, 4, 1 - 35 / 210),  # 1 - C(7, 4) / C(10, 4)
        (6, 4, 3, 1.0),  # n - c = 2 < k: every draw of 3 holds a correct one
        (1, 1, 1, 1.0),
        (1, 0, 1, 0.0),
    ],
)
def test_hand_computed_cases(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-15)
    assert pass_at_k_per_question([n], [c], k)[0] == pytest.approx(expected, abs=1e-15)


def test_large_n_stays_accurate():
    # C(1000, 100) overflows a float; the product form does not.
    assert pass_at_k(1000, 3, 100) == pytest.approx(exact_pass_at_k(1000, 3, 100), rel=1e-13)
    assert pass_at_k(400, 150, 20) == pytest.approx(exact_pass_at_k(400, 150, 20), rel=1e-13)


@given(st.integers(1, 60).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_matches_the_binomial_definition(case):
    n, c, k = case
    assert pass_at_k(n, c, k) == pytest.approx(exact_pass_at_k(n, c, k), rel=1e-12, abs=1e-14)


@given(
    st.lists(st.integers(1, 40).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))), min_size=1, max_size=20),
    st.integers(1, 40),
)
def test_vectorised_matches_per_question(questions, k):
    questions = [(n, c) for n, c in questions if n >= k] or [(k, 0)]
    n, c = map(list, zip(*questions, strict=True))
    per_question = pass_at_k_per_question(n, c, k)
    expected = [pass_at_k(n_i, c_i, k) for n_i, c_i in questions]
    np.testing.assert_allclose(per_question, expected, rtol=1e-13, atol=1e-15)
    assert mean_pass_at_k(n, c, k) == pytest.approx(float(np.mean(expected)), rel=1e-13, abs=1e-15)


def test_mean_over_questions_with_one_sample_count():
    assert mean_pass_at_k(n=8, c=[0, 2, 8, 4], k=1) == pytest.approx((0 + 2 / 8 + 1 + 4 / 8) / 4, abs=1e-15)
    assert mean_pass_at_k(n=8, c=[0, 1, 8, 0], k=8) == 0.5  # MAYE's pass@8: share with any correct sample


@pytest.mark.parametrize(
    ("n", "c", "k", "message"),
    [
        (4, 1, 5, "k=5 exceeds n=4"),
        (4, 5, 2, "c=5 correct samples exceeds n=4"),
        (4, -1, 2, "c=-1"),
        (4, 1, 0, "k=0"),
        (-2, 0, 1, "n=-2"),
        (0, 0, 1, "n=0"),
    ],
)
def test_invalid_counts_are_named(n, c, k, message):
    with pytest.raises(ValueError, match=message):
        pass_at_k(n, c, k)


def test_vectorised_errors_name_the_question():
    with pytest.raises(ValueError, match=r"question 2\): c=9 correct samples exceeds n=8"):
        pass_at_k_per_question(8, [0, 1, 9], 1)
    with pytest.raises(ValueError, match=r"question 1\): k=4 exceeds n=3"):
        pass_at_k_per_question([8, 3], [0, 0], 4)
    with pytest.raises(TypeError, match="integer counts"):
        pass_at_k_per_question(8, [0.5, 1.0], 1)
    with pytest.raises(TypeError, match="integer count"):
        pass_at_k(8, 2.5, 1)
    with pytest.raises(ValueError, match="no questions"):
        mean_pass_at_k(8, [], 1)
