"""A VLM's vision encoder and projector, by module and parameter name (what ``vision_trace`` finds, or an
override of it), and the names that belong to each.

- **encoder**: the vision transformer (patch embedding, blocks); **projector**: what maps its features
  into the language model's embedding space (Qwen's ``visual.merger``, Idefics3's ``connector``, LLaVA's /
  InternVL's / Gemma 3's ``multi_modal_projector``). Qwen nests its merger inside ``visual``: a name belongs
  to the projector when a projector name matches it, else to the encoder when an encoder name does.
- ``freeze_vision_tower`` freezes the **encoder only**, in every family; the projector trains unless
  ``freeze_projector`` is set too (``rl.runtime.vision_tower``).
- LoRA never adapts the encoder, the projector or the LM head (``rl.runtime.lora``).

A name matches a module or parameter whose qualified name ends with it, or with it followed by more
(``visual`` matches ``model.visual.blocks.0.attn.qkv.weight``, also under peft's ``base_model.model.``
prefix). :data:`FAMILY_PARTS` overrides the traced parts of a family, by ``config.model_type``, where the
trace is wrong (``tests/aerorl_ops/models/test_vision_trace.py`` holds the trace to every tested family).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class FamilyParts:
    """A model's vision encoder and projector (module or parameter names)."""

    encoder: tuple[str, ...]
    projector: tuple[str, ...]


_GLM = FamilyParts(("visual",), ("visual.merger",))

FAMILY_PARTS: dict[str, FamilyParts] = {
    "glm4v": _GLM,  # its merger takes the language model's width from the downsampling convolution before it
    "glm4v_moe": _GLM,
}
"""``config.model_type`` -> its parts, where the trace of ``vision_trace`` finds them wrong."""


def _matches(name: str, part: str) -> bool:
    return re.fullmatch(rf"(.*\.)?{re.escape(part)}(\..*)?", name) is not None


def part_of(name: str, parts: FamilyParts) -> str | None:
    """``"projector"``, ``"encoder"`` or None: which part the parameter or module ``name`` belongs to."""
    if any(_matches(name, part) for part in parts.projector):
        return "projector"
    if any(_matches(name, part) for part in parts.encoder):
        return "encoder"
    return None


def part_parameters(model: torch.nn.Module, parts: FamilyParts, part: str) -> dict[str, torch.nn.Parameter]:
    """``model``'s parameters in ``part`` (``"encoder"`` or ``"projector"``) of ``parts``, by qualified name."""
    return {name: p for name, p in model.named_parameters() if part_of(name, parts) == part}


def vision_module_names(model: torch.nn.Module, parts: FamilyParts) -> list[str]:
    """Qualified names of the outermost modules of ``model``'s encoder and projector."""
    found = [name for name, _ in model.named_modules() if name and part_of(name, parts)]
    return [name for name in found if not any(name.startswith(outer + ".") for outer in found)]
