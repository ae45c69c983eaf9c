"""Paired model-vs-baseline comparisons on constructed cases with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from aerorl_ops.eval_metrics import paired
from aerorl_ops.eval_metrics.binomial import clopper_pearson
from aerorl_ops.eval_metrics.paired import (
    mcnemar_exact,
    mcnemar_p_value,
    paired_bootstrap,
)


def constructed(seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """100 questions: A right on 60, B on 50; both right 45, only A 15, only B 5, neither 35."""
    a = np.array([1] * 45 + [1] * 15 + [0] * 5 + [0] * 35)
    b = np.array([1] * 45 + [0] * 15 + [1] * 5 + [0] * 35)
    order = np.random.default_rng(seed).permutation(100)
    return a[order], b[order]


def exact_bootstrap_quantiles(n: int, b: int, c: int, tails: tuple[float, float]) -> tuple[float, float]:
    """Quantiles of the exact bootstrap law of the mean difference (B* - C*) / n, where
    (B*, C*, rest) ~ Multinomial(n; b/n, c/n, 1 - (b + c)/n)."""
    pb, pc = b / n, c / n
    law: dict[int, float] = {}
    for i in range(n + 1):
        for j in range(n + 1 - i):
            p = math.comb(n, i) * math.comb(n - i, j) * pb**i * pc**j * (1 - pb - pc) ** (n - i - j)
            law[i - j] = law.get(i - j, 0.0) + p
    values = sorted(law)
    cdf = np.cumsum([law[v] for v in values])
    return tuple(values[int(np.searchsorted(cdf, tail))] / n for tail in tails)


def test_bootstrap_difference_is_exact_and_the_interval_matches_the_bootstrap_law():
    a, b = constructed()
    result = paired_bootstrap(a, b, resamples=20_000, seed=0)
    assert result.method == "paired_bootstrap"
    assert (result.n, result.b, result.c, result.resamples) == (100, 15, 5, 20_000)
    assert result.model_accuracy == 0.6 and result.baseline_accuracy == 0.5
    assert result.difference == pytest.approx(0.10, abs=1e-15)
    assert result.p_value is None
    assert result.ci_low < result.difference < result.ci_high
    low, high = exact_bootstrap_quantiles(100, 15, 5, (0.025, 0.975))  # (0.02, 0.19)
    step = 1 / 100  # the mean difference lives on a lattice of 1/n
    assert result.ci_low == pytest.approx(low, abs=step + 1e-12)
    assert result.ci_high == pytest.approx(high, abs=step + 1e-12)


def test_identical_models_give_zero_difference_and_a_zero_width_interval():
    a, _ = constructed()
    result = paired_bootstrap(a, a.copy(), resamples=2_000, seed=3)
    assert (result.difference, result.ci_low, result.ci_high, result.b, result.c) == (0.0, 0.0, 0.0, 0, 0)


def test_bootstrap_is_seeded_and_independent_of_chunking(monkeypatch):
    a, b = constructed()
    first = paired_bootstrap(a, b, resamples=3_000, seed=11)
    assert paired_bootstrap(a, b, resamples=3_000, seed=11) == first
    monkeypatch.setattr(paired, "_BOOTSTRAP_CHUNK_ELEMENTS", 250)  # 2 resamples per chunk
    assert paired_bootstrap(a, b, resamples=3_000, seed=11) == first
    others = {(r.ci_low, r.ci_high) for r in (paired_bootstrap(a, b, resamples=500, seed=s) for s in range(8))}
    assert len(others) > 1  # the seed is used


def test_bootstrap_takes_fractional_scores():
    result = paired_bootstrap([0.5, 1.0, 0.0], [0.25, 1.0, 0.75], resamples=500)
    assert result.difference == pytest.approx((0.25 + 0.0 - 0.75) / 3, abs=1e-15)
    assert (result.b, result.c) == (1, 1)
    assert -0.75 <= result.ci_low <= result.difference <= result.ci_high <= 0.25


def test_mcnemar_textbook_example():
    # Fagerland, Lydersen & Laake (2013), BMC Med Res Methodol 13:91, Table 1 (Bentur et al.):
    # airway hyper-responsiveness in 21 children, discordant pairs 1 and 7. Exact conditional
    # p = 2 * P(X <= 1), X ~ Binomial(8, 1/2) = 2 * 9/256 = 0.0703125 (reported as 0.070).
    before = [1, 1] + [0] * 19
    after = [1, 0] + [1] * 7 + [0] * 12
    result = mcnemar_exact(model=after, baseline=before)
    assert (result.n, result.b, result.c) == (21, 7, 1)
    assert result.p_value == 0.0703125
    assert result.difference == pytest.approx(6 / 21, abs=1e-15)
    pi_low, pi_high = clopper_pearson(7, 8)
    assert result.ci_low == pytest.approx(8 * (2 * pi_low - 1) / 21, abs=1e-15)
    assert result.ci_high == pytest.approx(8 * (2 * pi_high - 1) / 21, abs=1e-15)
    reverse = mcnemar_exact(model=before, baseline=after)
    assert reverse.p_value == result.p_value
    assert (reverse.ci_low, reverse.ci_high) == pytest.approx((-result.ci_high, -result.ci_low), abs=1e-12)


def test_mcnemar_on_the_constructed_case():
    a, b = constructed()
    result = mcnemar_exact(a, b)
    assert result.method == "mcnemar_exact"
    assert (result.n, result.b, result.c) == (100, 15, 5)
    assert result.difference == pytest.approx(0.10, abs=1e-15)
    # 2 * sum_{i <= 5} C(20, i) / 2**20 = 2 * 21700 / 1048576
    assert result.p_value == 43_400 / 1_048_576
    # Clopper-Pearson of 15/20 (checked against mpmath's regularized incomplete beta)
    # is [0.50895412829204246, 0.91342853089856546]; the difference is 20/100 * (2 pi - 1).
    assert result.ci_low == pytest.approx(0.2 * (2 * 0.50895412829204246 - 1), abs=1e-12)
    assert result.ci_high == pytest.approx(0.2 * (2 * 0.91342853089856546 - 1), abs=1e-12)
    assert result.ci_low > 0  # agrees with p < 0.05


def test_mcnemar_closed_form_when_every_discordant_pair_favours_the_baseline():
    model = [0] * 7 + [1] * 4 + [0] * 10
    baseline = [1] * 7 + [1] * 4 + [0] * 10
    result = mcnemar_exact(model, baseline)
    assert (result.b, result.c) == (0, 7)
    assert result.p_value == 2 / 2**7
    pi_high = 1 - 0.025 ** (1 / 7)  # Clopper-Pearson upper end for 0 of 7
    assert result.ci_low == pytest.approx(-7 / 21, abs=1e-15)
    assert result.ci_high == pytest.approx(7 * (2 * pi_high - 1) / 21, abs=1e-12)


def test_mcnemar_interval_and_test_agree():
    for b in range(20):
        for c in range(20):
            model = [1] * b + [0] * c + [1, 0]
            baseline = [0] * b + [1] * c + [1, 0]
            result = mcnemar_exact(model, baseline)
            exact = min(1.0, 2 * sum(math.comb(b + c, i) for i in range(min(b, c) + 1)) / 2 ** (b + c))
            assert result.p_value == exact
            assert (result.p_value < 0.05) == (result.ci_low > 0 or result.ci_high < 0), (b, c)


def test_mcnemar_without_discordant_pairs():
    result = mcnemar_exact([1, 0, 1], [True, False, True])
    assert (result.difference, result.ci_low, result.ci_high, result.p_value) == (0.0, 0.0, 0.0, 1.0)


def test_mcnemar_p_value_edges():
    assert mcnemar_p_value(3, 3) == 1.0
    assert mcnemar_p_value(0, 0) == 1.0
    assert mcnemar_p_value(2, 9) == mcnemar_p_value(9, 2) == 2 * (1 + 11 + 55) / 2**11
    assert mcnemar_p_value(0, 1_000) == 2.0**-999  # stays exact far into the tail


def test_paired_input_errors():
    with pytest.raises(ValueError, match="model has 2 outcomes but baseline has 3"):
        paired_bootstrap([1, 0], [1, 0, 1])
    with pytest.raises(ValueError, match="no paired questions"):
        mcnemar_exact([], [])
    with pytest.raises(ValueError, match=r"baseline\[0\] = 0.5: a binary outcome"):
        mcnemar_exact([1], [0.5])
    with pytest.raises(ValueError, match=r"model\[1\] = 2.0: a score must lie in \[0, 1\]"):
        paired_bootstrap([0, 2], [0, 1])
    with pytest.raises(ValueError, match="confidence"):
        paired_bootstrap([1], [0], confidence=1.0)
    with pytest.raises(ValueError, match="resamples"):
        paired_bootstrap([1], [0], resamples=0)
