"""The replay summary both scorers return (AeroRL's keys, numbers and ordering)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

Scores = Sequence[float] | np.ndarray


def empty_summary(weights: Mapping[str, float], pass_threshold: float) -> dict[str, Any]:
    """The summary of zero records (AeroRL's, plus ``pass_threshold`` and ``weights``)."""
    return {
        "count": 0,
        "average_reward": 0.0,
        "pass_rate": 0.0,
        "pass_threshold": pass_threshold,
        "component_averages": {},
        "weights": weights,
        "best_examples": [],
        "worst_examples": [],
        "results": [],
    }


def python_sum(values: Scores) -> float:
    """``sum(values)`` exactly as Python computes it, as AeroRL averages (bit-identical).

    Python 3.11's ``sum`` of floats adds left to right from 0, which is what
    ``np.cumsum`` does; from 3.12 ``sum`` compensates rounding, so there the values go
    through ``sum`` itself.

    >>> python_sum(np.array([0.1, 0.2, 0.3])) == sum([0.1, 0.2, 0.3])
    True
    """
    if not isinstance(values, np.ndarray):
        return sum(values)
    if sys.version_info >= (3, 12):
        return sum(values.tolist())
    return float(np.cumsum(np.concatenate([[0.0], values.astype(np.float64)]))[-1])


def rank_descending(totals: np.ndarray) -> np.ndarray:
    """Indices from highest to lowest total; ties keep input order (Python's stable sort).

    >>> rank_descending(np.array([0.1, 0.5, 0.1, 0.5])).tolist()
    [1, 3, 0, 2]
    """
    return np.argsort(-totals, kind="stable")


def build_summary(
    *,
    totals: Scores,
    component_columns: Mapping[str, Scores],
    id_at: Callable[[int], Any],
    components_at: Callable[[int], dict[str, float]],
    weights: Mapping[str, float],
    pass_threshold: float,
    top_k: int,
    results: Any,
) -> dict[str, Any]:
    """Averages, pass rate and best/worst examples over already-scored records.

    ``totals`` and the component columns are in record order; ``id_at(i)`` and
    ``components_at(i)`` describe record ``i``. ``top_k`` slices like AeroRL:
    ``ranked[:top_k]`` and ``ranked[-top_k:]`` (so ``top_k=0`` lists every record as worst).
    """
    count = len(totals)
    totals_array = np.asarray(totals, dtype=np.float64)
    passed = int(np.count_nonzero(totals_array >= pass_threshold))
    ranked = rank_descending(totals_array)

    def example(index: int) -> dict[str, Any]:
        total = totals[index]
        total = total.item() if isinstance(total, np.generic) else total
        return {"id": id_at(index), "total_reward": total, "components": components_at(index)}

    return {
        "count": count,
        "average_reward": round(python_sum(totals) / count, 6),
        "pass_rate": round(passed / count, 6),
        "pass_threshold": pass_threshold,
        "component_averages": {
            name: round(python_sum(column) / count, 6) for name, column in component_columns.items()
        },
        "weights": weights,
        "best_examples": [example(int(i)) for i in ranked[:top_k]],
        "worst_examples": [example(int(i)) for i in ranked[-top_k:]],
        "results": results,
    }
