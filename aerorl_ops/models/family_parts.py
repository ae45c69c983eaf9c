"""The only per-family code of training: which modules of a VLM are its vision encoder and its
projector, by ``config.model_type`` (the token that ends a turn is read from the chat template:
``models.end_of_turn``).

- **encoder**: the vision transformer (patch embedding, blocks); **projector**: what maps its
  features into the language model's embedding space (Qwen's ``visual.merger``, Idefics3's
  ``connector``, LLaVA's / InternVL's / Gemma 3's ``multi_modal_projector``). Qwen nests its merger
  inside ``visual``: a parameter belongs to the projector when a projector name matches it, else to
  the encoder when an encoder name does.
- ``freeze_vision_tower`` freezes the **encoder only**, in every family; the projector trains unless
  ``freeze_projector`` is set too.
- LoRA never adapts the encoder, the projector or the LM head (``rl.runtime.lora``).

A name in the table matches a module or parameter whose qualified name ends with it, or with it
followed by more (``visual`` matches ``model.visual.blocks.0.attn.qkv.weight``, also under peft's
``base_model.model.`` prefix). A family not in the table gets parts guessed from module names
(:data:`GUESSED_ENCODERS`, :data:`GUESSED_PROJECTORS`), with a warning naming what was guessed.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass

import torch

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FamilyParts:
    """A family's vision encoder and projector (module or parameter names)."""

    encoder: tuple[str, ...]
    projector: tuple[str, ...]


_QWEN = FamilyParts(("visual",), ("visual.merger",))
_QWEN3 = FamilyParts(("visual",), ("visual.merger", "visual.deepstack_merger_list"))
_CONNECTOR = FamilyParts(("vision_model",), ("connector",))
_TOWER = FamilyParts(("vision_tower",), ("multi_modal_projector",))
_TOWER_NEWLINE = FamilyParts(("vision_tower",), ("multi_modal_projector", "image_newline"))

FAMILY_PARTS: dict[str, FamilyParts] = {
    "qwen2_vl": _QWEN,
    "qwen2_5_vl": _QWEN,
    "qwen3_vl": _QWEN3,
    "qwen3_vl_moe": _QWEN3,
    "glm4v": _QWEN,
    "idefics3": _CONNECTOR,  # SmolVLM
    "smolvlm": _CONNECTOR,  # SmolVLM2
    "idefics2": _CONNECTOR,  # its perceiver resampler is inside the connector
    "gemma3": _TOWER,
    "paligemma": _TOWER,
    "aya_vision": _TOWER,
    "llava": _TOWER,
    "internvl": _TOWER,
    "llava_next": _TOWER_NEWLINE,
    "llava_onevision": _TOWER_NEWLINE,
    "mllama": FamilyParts(("vision_model",), ("multi_modal_projector",)),
    "mistral3": _TOWER,  # its projector holds the 2 x 2 patch merger
    "llama4": FamilyParts(("vision_model",), ("vision_model.vision_adapter", "multi_modal_projector")),  # the
    # adapter: the tower's pixel-shuffle MLP, which merges patches as Qwen's merger does
    "perception_lm": _TOWER,
}

GUESSED_ENCODERS = ("visual", "vision_tower", "vision_model", "vision_encoder")
GUESSED_PROJECTORS = ("multi_modal_projector", "connector", "mm_projector", "merger", "mlp1")


def _matches(name: str, part: str) -> bool:
    return re.fullmatch(rf"(.*\.)?{re.escape(part)}(\..*)?", name) is not None


def _model_type(model: torch.nn.Module) -> str:
    return getattr(getattr(model, "config", None), "model_type", None) or type(model).__name__


def family_parts(model: torch.nn.Module) -> FamilyParts:
    """``model``'s row of :data:`FAMILY_PARTS`, or parts guessed from its module names (with a warning)."""
    model_type = _model_type(model)
    if model_type in FAMILY_PARTS:
        return FAMILY_PARTS[model_type]
    names = [name for name, _ in model.named_modules()]
    encoder = tuple(part for part in GUESSED_ENCODERS if any(_matches(name, part) for name in names))[:1]
    projector = tuple(part for part in GUESSED_PROJECTORS if any(_matches(name, part) for name in names))
    _warn_once(f"model type {model_type!r} is not in aerorl_ops.models.family_parts.FAMILY_PARTS; guessed its "
               f"vision encoder {encoder or 'none'} and projector {projector or 'none'}; add a row to FAMILY_PARTS "
               "if these are wrong")
    return FamilyParts(encoder, projector)


@functools.cache
def _warn_once(message: str) -> None:
    logger.warning(message)


def part_of(name: str, parts: FamilyParts) -> str | None:
    """``"projector"``, ``"encoder"`` or None: which part the parameter or module ``name`` belongs to."""
    if any(_matches(name, part) for part in parts.projector):
        return "projector"
    if any(_matches(name, part) for part in parts.encoder):
        return "encoder"
    return None


def part_parameters(model: torch.nn.Module, part: str) -> dict[str, torch.nn.Parameter]:
    """``model``'s parameters in ``part`` (``"encoder"`` or ``"projector"``), by qualified name."""
    parts = family_parts(model)
    return {name: p for name, p in model.named_parameters() if part_of(name, parts) == part}


def vision_module_names(model: torch.nn.Module) -> list[str]:
    """Qualified names of the outermost modules of ``model``'s encoder and projector."""
    parts = family_parts(model)
    found = [name for name, _ in model.named_modules() if name and part_of(name, parts)]
    return [name for name in found if not any(name.startswith(outer + ".") for outer in found)]
