"""Test parameters over every tiny family (``tiny_families.FAMILIES``).

A family the installed transformers cannot run is marked as an expected failure in the tests that run its
model, naming why: transformers 5.20 to 5.24's ``Llama4ForConditionalGeneration.forward`` ends by reading
``image_outputs`` from its language model's output, which has none (``AttributeError``), so nothing runs a
Llama 4 forward there (its tests pass in the vLLM venv, whose transformers is older: ``make test-vllm``); and
its ``generate`` does not repeat its image features for n replies to a prompt (``aerorl eval`` exits 1).
A family whose checkpoint cannot be built here (PerceptionLM's tower needs timm) is skipped by
``tiny_family_dir``, naming what is missing.
"""

from __future__ import annotations

import pytest

from aerorl_ops.models.tiny_families import FAMILIES

FORWARD_BROKEN = {
    "llama4": "transformers' Llama4ForConditionalGeneration.forward reads image_outputs from its language model's "
              "output, which has none, and its generate does not repeat image features for n replies a prompt "
              "(transformers 5.20 to 5.24)",
}


def family_params(*more: tuple, runs_model: bool = True, families=tuple(FAMILIES),
                  raises: type[Exception] = AttributeError) -> list:
    """One ``pytest.param`` per family of ``families`` (each followed by each of ``more``'s values, when given);
    where ``runs_model``, the families of :data:`FORWARD_BROKEN` are expected to fail with ``raises`` (what the
    test sees of the failure: the ``AttributeError`` itself, or a command's failed exit code)."""
    rows = [(name, *values) for name in families for values in (more or [()])]
    return [pytest.param(*row, marks=_marks(row[0], runs_model, raises), id="-".join(map(str, row))) for row in rows]


def _marks(name: str, runs_model: bool, raises: type[Exception]) -> list:
    if runs_model and name in FORWARD_BROKEN:
        return [pytest.mark.xfail(raises=raises, strict=False, reason=FORWARD_BROKEN[name])]
    return []
