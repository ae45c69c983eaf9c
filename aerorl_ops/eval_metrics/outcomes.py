"""Checks that turn per-sample outcomes into numpy arrays, naming the input that is wrong.

Two kinds of outcome travel through the evaluation helpers:

- a **binary** outcome per sample (right or wrong), as bools or 0/1 numbers;
- a **score** per question in ``[0, 1]``, such as that question's pass@k estimate.

Both accept a sequence, a numpy array or a CPU torch tensor.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def as_scores(values: Any, name: str) -> np.ndarray:
    """``values`` as a 1-D float64 array, each finite and within ``[0, 1]``.

    >>> as_scores([True, 0, 0.25], "model").tolist()
    [1.0, 0.0, 0.25]
    >>> as_scores([0.5, 1.5], "model")
    Traceback (most recent call last):
    ...
    ValueError: model[1] = 1.5: a score must lie in [0, 1]
    """
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional (one value per sample), got shape {array.shape}")
    bad = np.flatnonzero(~((array >= 0.0) & (array <= 1.0)))  # NaN fails both comparisons
    if bad.size:
        index = int(bad[0])
        raise ValueError(f"{name}[{index}] = {float(array[index])!r}: a score must lie in [0, 1]")
    return array


def as_binary(values: Any, name: str) -> np.ndarray:
    """``values`` as a 1-D bool array; each value must be a bool, 0 or 1.

    >>> as_binary([True, 0, 1.0], "baseline").tolist()
    [True, False, True]
    >>> as_binary([1, 0.5], "baseline")
    Traceback (most recent call last):
    ...
    ValueError: baseline[1] = 0.5: a binary outcome must be True/False or 0/1
    """
    array = as_scores(values, name)
    bad = np.flatnonzero((array != 0.0) & (array != 1.0))
    if bad.size:
        index = int(bad[0])
        raise ValueError(f"{name}[{index}] = {float(array[index])!r}: a binary outcome must be True/False or 0/1")
    return array == 1.0
