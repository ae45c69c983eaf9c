"""The unbiased pass@k estimator (Chen et al., 2021, "Evaluating Large Language Models Trained
on Code", the Codex paper), as MAYE's evaluation scheme uses it.

With ``n`` samples of a question of which ``c`` are correct, the probability that at least one
of ``k`` samples drawn without replacement is correct is::

    pass@k = 1 - C(n - c, k) / C(n, k) = 1 - prod_{i = n - c + 1}^{n} (1 - k / i)

The product form never forms a binomial coefficient, so it stays accurate for large ``n``.
``n - c < k`` means every draw of ``k`` holds a correct sample: pass@k is exactly 1. Special
cases: ``k = 1`` gives ``c / n``; ``k = n`` gives 1 when ``c > 0`` and 0 otherwise, which is
MAYE's "any of the 8 samples is right" pass@8.

A score over a dataset is the mean of the per-question estimates (``mean_pass_at_k``).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np


def _count(value: Any, name: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"pass@k: {name} must be an integer count, got {value!r}") from None


def _check(n: int, c: int, k: int, where: str = "") -> None:
    if n < 1:
        raise ValueError(f"pass@k{where}: n={n} samples; each question needs at least one sample")
    if c < 0:
        raise ValueError(f"pass@k{where}: c={c} correct samples; a count cannot be negative")
    if c > n:
        raise ValueError(f"pass@k{where}: c={c} correct samples exceeds n={n} samples")
    if k < 1:
        raise ValueError(f"pass@k{where}: k={k}; k must be at least 1")
    if k > n:
        raise ValueError(f"pass@k{where}: k={k} exceeds n={n} samples; draw at least k samples or lower k")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one question with ``n`` samples, ``c`` of them correct.

    >>> pass_at_k(n=5, c=2, k=2)  # 1 - C(3, 2) / C(5, 2) = 1 - 3/10
    0.7
    >>> pass_at_k(n=8, c=2, k=1), pass_at_k(n=8, c=1, k=8), pass_at_k(n=8, c=0, k=8)
    (0.25, 1.0, 0.0)
    >>> pass_at_k(n=4, c=1, k=5)
    Traceback (most recent call last):
    ...
    ValueError: pass@k: k=5 exceeds n=4 samples; draw at least k samples or lower k
    """
    n, c, k = _count(n, "n"), _count(c, "c"), _count(k, "k")
    _check(n, c, k)
    if n - c < k:
        return 1.0
    factors = 1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)  # [c]
    return float(1.0 - np.prod(factors))


def pass_at_k_per_question(n: Any, c: Any, k: int) -> np.ndarray:
    """Unbiased pass@k of each question: ``n`` (per question, or one count for all) and ``c``.

    >>> pass_at_k_per_question(n=4, c=[0, 1, 2, 4], k=2).round(6).tolist()  # 1 - C(4 - c, 2) / 6
    [0.0, 0.5, 0.833333, 1.0]
    """
    k = _count(k, "k")
    n_arr, c_arr = np.broadcast_arrays(np.asarray(n), np.asarray(c))
    if n_arr.ndim != 1:
        raise ValueError(f"pass@k: c must be one count per question (1-D), got shape {c_arr.shape}")
    for name, array in (("n", n_arr), ("c", c_arr)):
        if array.size and not np.issubdtype(array.dtype, np.integer):
            raise TypeError(f"pass@k: {name} must hold integer counts, got dtype {array.dtype}")
    n_arr, c_arr = n_arr.astype(np.int64), c_arr.astype(np.int64)
    if k < 1:
        raise ValueError(f"pass@k: k={k}; k must be at least 1")
    bad = np.flatnonzero((n_arr < 1) | (c_arr < 0) | (c_arr > n_arr) | (k > n_arr))
    if bad.size:
        index = int(bad[0])
        _check(int(n_arr[index]), int(c_arr[index]), k, where=f" (question {index})")
    if n_arr.size == 0:
        return np.zeros(0, dtype=np.float64)
    steps = np.arange(int(c_arr.max()), dtype=np.int64)  # [M]
    denominators = n_arr[:, None] - steps[None, :]  # [Q, M] n, n-1, ..., n-M+1
    counted = steps[None, :] < c_arr[:, None]  # [Q, M] the c factors n-c+1..n of each question
    factors = np.where(counted, 1.0 - k / np.maximum(denominators, 1), 1.0)  # [Q, M]
    estimate = 1.0 - np.prod(factors, axis=1)  # [Q]
    return np.where(n_arr - c_arr < k, 1.0, estimate)  # [Q]


def mean_pass_at_k(n: Any, c: Any, k: int) -> float:
    """Mean over questions of the unbiased pass@k; see ``pass_at_k_per_question``.

    >>> mean_pass_at_k(n=8, c=[0, 2, 8], k=1)  # (0 + 2/8 + 1) / 3
    0.4166666666666667
    """
    estimates = pass_at_k_per_question(n, c, k)
    if estimates.size == 0:
        raise ValueError("pass@k: no questions to average over")
    return float(estimates.mean())
