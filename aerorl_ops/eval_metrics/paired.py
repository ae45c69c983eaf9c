"""Paired comparison of a model with its baseline on the same questions.

Per question ``i`` the model scores ``a_i`` and the baseline ``z_i`` (0/1 for a single
greedy answer, or a pass@k estimate in ``[0, 1]``). The difference is
``d = mean_i (a_i - z_i)``; ``b`` counts questions where the model does better, ``c``
those where the baseline does. For binary outcomes ``d = (b - c) / n``.

- ``paired_bootstrap``: resample the ``n`` questions with replacement ``resamples`` times
  (seeded), take the mean difference of each resample, and report the percentile interval.
  Works for any scores; it gives no p-value.
- ``mcnemar_exact``: for binary outcomes. Given the ``m = b + c`` discordant questions,
  ``b ~ Binomial(m, pi)`` and ``pi = 1/2`` when the models are equally accurate. The exact
  two-sided p-value is ``min(1, 2 P(X <= min(b, c)))`` with ``X ~ Binomial(m, 1/2)``. Given
  ``m``, ``d = m (2 pi - 1) / n``, so the Clopper-Pearson interval of ``pi`` maps to an
  interval of ``d`` that treats the discordant share ``m / n`` as fixed. It inverts the same
  binomial test: ``p < 1 - confidence`` exactly when the interval excludes 0. No discordant
  questions give ``d = 0``, interval ``[0, 0]`` and ``p = 1``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from aerorl_ops.eval_metrics.binomial import clopper_pearson
from aerorl_ops.eval_metrics.outcomes import as_binary, as_scores

_BOOTSTRAP_CHUNK_ELEMENTS = 1 << 22  # resampled indices held at once (32 MiB of int64)


@dataclass(frozen=True)
class PairedComparison:
    """Model minus baseline on ``n`` paired questions, with a ``confidence`` interval.

    ``b``: questions where the model scores higher; ``c``: where the baseline does.
    ``p_value`` is the exact McNemar p-value, ``None`` for the bootstrap.
    """

    method: Literal["paired_bootstrap", "mcnemar_exact"]
    n: int
    model_accuracy: float
    baseline_accuracy: float
    difference: float
    ci_low: float
    ci_high: float
    confidence: float
    b: int
    c: int
    p_value: float | None
    resamples: int | None = None


def _paired(
    model: Any, baseline: Any, convert: Callable[[Any, str], np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    a = convert(model, "model")
    z = convert(baseline, "baseline")
    if a.size != z.size:
        raise ValueError(f"model has {a.size} outcomes but baseline has {z.size}; compare them on the same questions")
    if a.size == 0:
        raise ValueError("no paired questions to compare")
    return a, z


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")


def paired_bootstrap(
    model: Any, baseline: Any, resamples: int = 10_000, confidence: float = 0.95, seed: int = 0
) -> PairedComparison:
    """Percentile bootstrap interval of the mean paired difference ``model - baseline``.

    >>> result = paired_bootstrap([1, 1, 0, 1], [1, 1, 0, 1])
    >>> result.difference, result.ci_low, result.ci_high
    (0.0, 0.0, 0.0)
    """
    _check_confidence(confidence)
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}")
    a, z = _paired(model, baseline, as_scores)
    differences = a - z  # [n]
    n = differences.size
    rng = np.random.default_rng(seed)
    means = np.empty(resamples, dtype=np.float64)  # [R]
    chunk = max(1, _BOOTSTRAP_CHUNK_ELEMENTS // n)
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        indices = rng.integers(0, n, size=(stop - start, n))  # [chunk, n]
        means[start:stop] = differences[indices].mean(axis=1)  # [chunk]
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return PairedComparison(
        method="paired_bootstrap",
        n=n,
        model_accuracy=float(a.mean()),
        baseline_accuracy=float(z.mean()),
        difference=float(differences.mean()),
        ci_low=float(low),
        ci_high=float(high),
        confidence=confidence,
        b=int((differences > 0).sum()),
        c=int((differences < 0).sum()),
        p_value=None,
        resamples=resamples,
    )


def mcnemar_p_value(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value ``min(1, 2 P(X <= min(b, c)))``, ``X ~ Binomial(b + c, 1/2)``.

    Summed in integers, so the result is the correctly rounded exact value.

    >>> mcnemar_p_value(1, 7)  # 2 * (1 + 8) / 2**8
    0.0703125
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts cannot be negative, got b={b}, c={c}")
    m = b + c
    term = lower_tail = 1  # C(m, 0)
    for i in range(min(b, c)):
        term = term * (m - i) // (i + 1)  # C(m, i + 1), exact
        lower_tail += term
    return min(1.0, 2 * lower_tail / 2**m)


def mcnemar_exact(model: Any, baseline: Any, confidence: float = 0.95) -> PairedComparison:
    """Exact McNemar test and exact conditional interval for binary paired outcomes.

    >>> result = mcnemar_exact(model=[1] * 7 + [0] * 14, baseline=[0] * 7 + [1] + [0] * 13)
    >>> result.b, result.c, result.p_value, round(result.difference, 4)
    (7, 1, 0.0703125, 0.2857)
    """
    _check_confidence(confidence)
    a, z = _paired(model, baseline, as_binary)
    n = int(a.size)
    b = int((a & ~z).sum())
    c = int((~a & z).sum())
    m = b + c
    if m == 0:
        low = high = 0.0
    else:
        pi_low, pi_high = clopper_pearson(b, m, confidence)
        low, high = m * (2.0 * pi_low - 1.0) / n, m * (2.0 * pi_high - 1.0) / n
    return PairedComparison(
        method="mcnemar_exact",
        n=n,
        model_accuracy=float(a.mean()),
        baseline_accuracy=float(z.mean()),
        difference=(b - c) / n,
        ci_low=low,
        ci_high=high,
        confidence=confidence,
        b=b,
        c=c,
        p_value=mcnemar_p_value(b, c),
    )
