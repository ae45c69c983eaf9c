"""The eval_metrics package stays a pure library, and its docstring examples stay true."""

from __future__ import annotations

import ast
import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

from aerorl_ops import eval_metrics

MODULES = sorted(f"aerorl_ops.eval_metrics.{info.name}" for info in pkgutil.iter_modules(eval_metrics.__path__))
ALLOWED_IMPORTS = {"__future__", "collections", "dataclasses", "fractions", "math", "numpy", "operator", "re",
                   "typing", "aerorl_ops"}  # fmt: skip


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0


@pytest.mark.parametrize("path", sorted(Path(eval_metrics.__file__).parent.glob("*.py")), ids=lambda p: p.name)
def test_imports_only_the_standard_library_numpy_and_itself(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        for name in names:
            assert name.split(".")[0] in ALLOWED_IMPORTS, f"{path.name}:{node.lineno} imports {name}"
            if name.startswith("aerorl_ops"):
                assert name.startswith("aerorl_ops.eval_metrics"), f"{path.name}:{node.lineno} imports {name}"
