"""Whole episodes summarised (``eval_metrics.episodes``): success with its binomial standard error, mean return and
mean turns with the standard errors of means, checked by hand."""

from __future__ import annotations

import doctest
import math

import pytest

from aerorl_ops.eval_metrics import episodes
from aerorl_ops.eval_metrics.episodes import episode_report, mean_stderr


def test_the_module_examples_hold():
    assert doctest.testmod(episodes, raise_on_error=True).attempted == 4


def test_three_episodes_by_hand():
    report = episode_report([True, False, False], [0.91, 0.0, 0.0], [2, 10, 10])
    assert report.n == 3 and report.success == pytest.approx(1 / 3)
    assert report.success_stderr == pytest.approx(math.sqrt((1 / 3) * (2 / 3) / 3))
    assert report.mean_return == pytest.approx(0.91 / 3)
    # sample sd of (0.91, 0, 0): sqrt(((0.91 - m)^2 + 2 m^2) / 2), m = 0.91 / 3
    m = 0.91 / 3
    assert report.return_stderr == pytest.approx(math.sqrt(((0.91 - m) ** 2 + 2 * m ** 2) / 2 / 3))
    assert report.mean_turns == pytest.approx(22 / 3)
    assert report.turns_stderr == pytest.approx(math.sqrt(((2 - 22 / 3) ** 2 + 2 * (10 - 22 / 3) ** 2) / 2 / 3))


def test_one_episode_has_no_spread_and_equal_episodes_none_either():
    assert mean_stderr([4.0]) == (4.0, 0.0)
    report = episode_report([True] * 5, [0.5] * 5, [3] * 5)
    assert (report.success, report.success_stderr, report.return_stderr, report.turns_stderr) == (1.0, 0.0, 0.0, 0.0)


def test_lists_of_different_lengths_or_none_are_refused():
    with pytest.raises(ValueError, match="one success, return and turn count per episode, got 2, 1 and 2"):
        episode_report([True, False], [1.0], [1, 2])
    with pytest.raises(ValueError, match="got 0, 0 and 0"):
        episode_report([], [], [])
    with pytest.raises(ValueError, match="no values"):
        mean_stderr([])
