"""Binomial helpers: the standard error of an accuracy, the binomial CDF and the exact
(Clopper-Pearson, 1934) confidence interval of a proportion.

For ``x`` successes in ``m`` trials, ``p_hat = x / m`` and::

    stderr(p_hat) = sqrt(p_hat * (1 - p_hat) / m)
    Clopper-Pearson: lower solves P(X >= x; p) = alpha / 2 (0 when x = 0),
                     upper solves P(X <= x; p) = alpha / 2 (1 when x = m)

The interval's ends are found by bisection on the CDF, to float precision (no SciPy needed).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np


def binomial_stderr(accuracy: float, n: int) -> float:
    """Standard error ``sqrt(p (1 - p) / n)`` of an accuracy ``p`` measured on ``n`` samples.

    >>> binomial_stderr(0.5, 100)
    0.05
    >>> binomial_stderr(1.0, 10)
    0.0
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"binomial_stderr: n must be a positive sample count, got {n!r}")
    if not 0.0 <= accuracy <= 1.0:
        raise ValueError(f"binomial_stderr: accuracy must lie in [0, 1], got {accuracy!r}")
    return math.sqrt(accuracy * (1.0 - accuracy) / n)


def binomial_cdf(x: int, m: int, p: float) -> float:
    """``P(X <= x)`` for ``X ~ Binomial(m, p)``, summed in log space.

    >>> round(binomial_cdf(1, 3, 0.5), 12)  # (1 + 3) / 8
    0.5
    """
    if x < 0:
        return 0.0
    if x >= m:
        return 1.0
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    i = np.arange(x + 1, dtype=np.float64)  # [x + 1]
    log_choose = np.concatenate(([0.0], np.cumsum(np.log(m - i[1:] + 1) - np.log(i[1:]))))  # [x + 1] log C(m, i)
    log_pmf = log_choose + i * math.log(p) + (m - i) * math.log1p(-p)  # [x + 1]
    top = log_pmf.max()
    return float(min(1.0, math.exp(top) * np.exp(log_pmf - top).sum()))


def clopper_pearson(x: int, m: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact two-sided interval for a proportion from ``x`` successes in ``m`` trials.

    >>> low, high = clopper_pearson(0, 10)  # upper = 1 - 0.025 ** (1/10)
    >>> low, round(high, 6)
    (0.0, 0.308497)
    """
    if m < 1 or not 0 <= x <= m:
        raise ValueError(f"clopper_pearson: needs 0 <= x <= m and m >= 1, got x={x}, m={m}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"clopper_pearson: confidence must lie in (0, 1), got {confidence!r}")
    tail = (1.0 - confidence) / 2.0
    lower = 0.0 if x == 0 else _bisect(lambda p: 1.0 - binomial_cdf(x - 1, m, p) - tail)
    upper = 1.0 if x == m else _bisect(lambda p: tail - binomial_cdf(x, m, p))
    return lower, upper


def _bisect(increasing: Callable[[float], float]) -> float:
    """The root in [0, 1] of a function that rises from negative to positive, to float precision."""
    lo, hi = 0.0, 1.0
    while True:
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:  # no float left between the ends
            return mid
        if increasing(mid) < 0.0:
            lo = mid
        else:
            hi = mid
