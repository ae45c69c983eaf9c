"""Build a checkpoint's processor from its files, as transformers builds it (``AutoProcessor``).

Every stock processor is built whole, video processor included: transformers' video processors, and the
image processors some families have only in its torchvision backend (LFM2-VL, Mistral 3, Llama 4), need
torchvision, which ``make setup`` installs beside the CPU torch (``scripts/patch_torchvision_for_cpu_torch.py``).
A processor that still cannot be built is an error naming the family (its ``model_type``) and what is
missing.
"""

from __future__ import annotations

from collections.abc import Mapping

from transformers import AutoProcessor, ProcessorMixin
from transformers.utils import is_torchvision_available

from aerorl_ops.error_line import error_line

PROCESSOR_ERRORS = (ImportError, OSError, ValueError, KeyError, TypeError)
"""What ``AutoProcessor`` raises on files it cannot build a processor from."""
TORCHVISION_HINT = ("torchvision does not import in this environment: install it beside torch (`make setup` "
                    "does, and patches PyPI's CUDA build to import beside a CPU torch)")


class ProcessorUnavailableError(ValueError):
    """A checkpoint's processor cannot be built here; the message names the family and what is missing."""


def build_processor(location: str, model_type: str, pretrained_kwargs: Mapping[str, object]) -> ProcessorMixin:
    """The processor of the checkpoint at ``location`` (a folder or hub id), whose config's type is
    ``model_type``; ``pretrained_kwargs`` go to ``from_pretrained``."""
    try:
        return AutoProcessor.from_pretrained(location, **pretrained_kwargs)
    except PROCESSOR_ERRORS as error:
        raise ProcessorUnavailableError(f"its {model_type} processor cannot be built: {missing(error)}") from error


def missing(error: Exception) -> str:
    """What ``error`` (raised building a processor) says is missing, in one line, with how to install
    torchvision when that is what the processor needs.

    >>> missing(ImportError("Package `num2words` is required.\\nInstall it."))
    'Package `num2words` is required. Install it.'
    """
    line = error_line(error)
    if "torchvision" in line.lower() and not is_torchvision_available():
        return f"{line} ({TORCHVISION_HINT})"
    return line
