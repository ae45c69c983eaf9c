"""The examples in the evaluator's and the eval settings' docstrings run and hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["aerorl_ops.config.evaluation", "aerorl_ops.eval_runner.replies", "aerorl_ops.eval_runner.summaries",
           "aerorl_ops.eval_runner.model_vs_baseline", "aerorl_ops.eval_runner.runner",
           "aerorl_ops.reporting.tensorboard", "aerorl_ops.storage.eval_schema", "aerorl_ops.rl.step.rollout_rounds",
           "aerorl_ops.rl.run.inputs"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
