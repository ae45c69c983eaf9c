"""The runnable examples in the reward modules' docstrings stay true."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "aerorl_ops.metrics",
    "aerorl_ops.replay.cli",
    "aerorl_ops.rewards.columnar.evaluate",
    "aerorl_ops.rewards.columnar.keys",
    "aerorl_ops.rewards.components",
    "aerorl_ops.rewards.dataset_metrics",
    "aerorl_ops.rewards.evaluate",
    "aerorl_ops.rewards.normalize",
    "aerorl_ops.rewards.replay_lines",
    "aerorl_ops.rewards.registry",
    "aerorl_ops.rewards.stack",
    "aerorl_ops.rewards.summary",
    "aerorl_ops.rewards.verifiers",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0
