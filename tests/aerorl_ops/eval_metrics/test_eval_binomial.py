"""Binomial standard error, CDF and Clopper-Pearson interval against known values."""

from __future__ import annotations

from math import comb

import pytest

from aerorl_ops.eval_metrics.binomial import (
    binomial_cdf,
    binomial_stderr,
    clopper_pearson,
)


def test_binomial_stderr():
    assert binomial_stderr(0.5, 100) == 0.05
    assert binomial_stderr(0.9, 400) == pytest.approx(0.015, abs=1e-15)  # sqrt(0.09 / 400)
    assert binomial_stderr(0.0, 7) == binomial_stderr(1.0, 7) == 0.0
    with pytest.raises(ValueError, match="n must be a positive sample count"):
        binomial_stderr(0.5, 0)
    with pytest.raises(ValueError, match="accuracy must lie in"):
        binomial_stderr(1.2, 10)


@pytest.mark.parametrize(("x", "m", "p"), [(0, 5, 0.3), (3, 10, 0.5), (7, 20, 0.123), (19, 20, 0.9), (40, 100, 0.41)])
def test_cdf_matches_the_sum_of_the_pmf(x, m, p):
    expected = sum(comb(m, i) * p**i * (1 - p) ** (m - i) for i in range(x + 1))
    assert binomial_cdf(x, m, p) == pytest.approx(expected, rel=1e-12)


def test_clopper_pearson_known_values():
    # R's binom.test(5, 10) reports 0.1870860 0.8129140; these digits come from mpmath.
    low, high = clopper_pearson(5, 10)
    assert low == pytest.approx(0.18708602844739853, abs=1e-12)
    assert high == pytest.approx(0.81291397155260147, abs=1e-12)
    low, high = clopper_pearson(150, 1000)
    assert low == pytest.approx(0.1284248111161728, abs=1e-12)
    assert high == pytest.approx(0.17365812856703597, abs=1e-12)


@pytest.mark.parametrize("m", [1, 7, 50])
def test_clopper_pearson_closed_forms_at_the_edges(m):
    assert clopper_pearson(0, m) == pytest.approx((0.0, 1 - 0.025 ** (1 / m)), abs=1e-13)
    assert clopper_pearson(m, m) == pytest.approx((0.025 ** (1 / m), 1.0), abs=1e-13)
    assert clopper_pearson(0, m, confidence=0.9)[1] == pytest.approx(1 - 0.05 ** (1 / m), abs=1e-13)


def test_clopper_pearson_rejects_bad_counts():
    with pytest.raises(ValueError, match="0 <= x <= m"):
        clopper_pearson(4, 3)
    with pytest.raises(ValueError, match="confidence"):
        clopper_pearson(1, 3, confidence=0.0)
