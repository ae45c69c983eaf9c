"""The runnable examples in the environment modules' docstrings stay true."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "aerorl_ops.envs.base",
    "aerorl_ops.envs.cached",
    "aerorl_ops.envs.easy_vqa",
    "aerorl_ops.text.exact_match",
    "aerorl_ops.envs.configured",
    "aerorl_ops.envs.image_paths",
    "aerorl_ops.envs.item_envs",
    "aerorl_ops.envs.items",
    "aerorl_ops.envs.jsonl_task",
    "aerorl_ops.envs.messages",
    "aerorl_ops.envs.mixture",
    "aerorl_ops.config.mixtures",
    "aerorl_ops.models.text_only",
    "aerorl_ops.envs.parquet_task",
    "aerorl_ops.envs.prior",
    "aerorl_ops.envs.registry",
    "aerorl_ops.envs.rejections",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
