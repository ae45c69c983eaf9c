"""Whole episodes of a multi-turn environment summarised: success rate, mean return and mean turns over
``n`` episodes, each with its standard error.

Success is the environment's accuracy test at an episode's last step (``StepInfo.correct``: MiniGrid's
goal reached), its standard error binomial; the return is the sum of the episode's rewards and the turns
the replies the model wrote, each with the standard error of a mean, ``s / sqrt(n)`` (``s`` the sample
standard deviation; 0.0 for a single episode).

>>> report = episode_report([True, False, True, True], [0.9, 0.0, 0.7, 0.8], [3, 8, 4, 2])
>>> report.n, report.success, round(report.success_stderr, 4), report.mean_turns
(4, 0.75, 0.2165, 4.25)
>>> round(report.mean_return, 3), round(report.return_stderr, 4)
(0.6, 0.2041)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from aerorl_ops.eval_metrics.binomial import binomial_stderr


@dataclass(frozen=True)
class EpisodeReport:
    """``n`` episodes: the share that succeeded, the mean return and the mean turns, with standard errors."""

    n: int
    success: float
    success_stderr: float
    mean_return: float
    return_stderr: float
    mean_turns: float
    turns_stderr: float


def mean_stderr(values: Sequence[float]) -> tuple[float, float]:
    """The mean of ``values`` and its standard error ``s / sqrt(n)`` (0.0 for one value).

    >>> mean_stderr([1.0, 3.0])
    (2.0, 1.0)
    """
    if not values:
        raise ValueError("mean_stderr: no values")
    n = len(values)
    mean = sum(values) / n
    if n == 1:
        return mean, 0.0
    variance = sum((value - mean) ** 2 for value in values) / (n - 1)
    return mean, math.sqrt(variance / n)


def episode_report(successes: Sequence[bool], returns: Sequence[float], turns: Sequence[int]) -> EpisodeReport:
    """The report of episodes given as three parallel lists (one entry per episode); ``ValueError`` when they
    are empty or differ in length."""
    n = len(successes)
    if n == 0 or len(returns) != n or len(turns) != n:
        raise ValueError(f"episode_report: one success, return and turn count per episode, got {n}, {len(returns)} "
                         f"and {len(turns)}")
    success = sum(bool(s) for s in successes) / n
    mean_return, return_stderr = mean_stderr([float(r) for r in returns])
    mean_turns, turns_stderr = mean_stderr([float(t) for t in turns])
    return EpisodeReport(n, success, binomial_stderr(success, n), mean_return, return_stderr, mean_turns,
                         turns_stderr)
