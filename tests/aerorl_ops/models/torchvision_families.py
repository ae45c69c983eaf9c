"""Test parameters for the families whose stock processor needs torchvision (``tiny_families.TORCHVISION_FAMILIES``:
Mistral 3, Llama 4, PerceptionLM).

They run where torchvision imports: the vLLM venv (``make vllm-setup``, whose torchvision is patched to
import beside CPU torch), so they are marked ``vllm`` (``make test-vllm`` selects them) and skipped, with
the reason, where it does not (``.venv``). A family the venv's transformers lacks, or PerceptionLM
without timm, is skipped by ``tiny_family_dir`` when its checkpoint cannot be built.
"""

from __future__ import annotations

import functools

import pytest

from aerorl_ops.models.tiny_families import TORCHVISION_FAMILIES


@functools.cache
def torchvision_missing() -> str:
    """Why torchvision cannot be used here (empty when it imports)."""
    try:
        import torchvision  # noqa: F401
    except (ImportError, RuntimeError, OSError) as error:  # not installed, or a CUDA build beside CPU torch
        return (f"needs torchvision, which does not import here ({type(error).__name__}: {error}); "
                "these families run in the vLLM venv: `make vllm-setup`, then `make test-vllm`")
    return ""


def torchvision_family_params(*more: tuple) -> list:
    """One ``pytest.param`` per family of ``TORCHVISION_FAMILIES`` (with each of ``more``'s values after the
    family's name, when given), marked ``vllm`` and skipped without torchvision."""
    marks = [pytest.mark.vllm, pytest.mark.skipif(bool(torchvision_missing()), reason=torchvision_missing())]
    if not more:
        return [pytest.param(name, marks=marks) for name in TORCHVISION_FAMILIES]
    return [pytest.param(name, *values, marks=marks) for name in TORCHVISION_FAMILIES for values in more]
