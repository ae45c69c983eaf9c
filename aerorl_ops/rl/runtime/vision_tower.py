"""The vision encoder and projector of a VLM, frozen on request (verl's ``freeze_vision_tower``).

Which modules they are is read from the model (``LoadedVLM.vision.parts``: the modules that run on its
images, ``models.vision_trace``). ``freeze_vision_tower`` means the **encoder only** in every family (Qwen's
``visual`` without its ``merger``, Idefics3's ``vision_model``, LLaVA's / Gemma 3's / InternVL's
``vision_tower``); the projector is frozen by ``freeze_projector``. A peft wrapper (LoRA) only prefixes the
names, so the same search finds them there.
"""

from __future__ import annotations

import torch

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.models.family_parts import FamilyParts, part_of, part_parameters


def find_vision_tower(model: torch.nn.Module, parts: FamilyParts) -> tuple[str, torch.nn.Module] | None:
    """``(qualified name, module)`` of the outermost module of the model's vision encoder, or None."""
    found = [(name, module) for name, module in model.named_modules() if name and part_of(name, parts) == "encoder"]
    return min(found, key=lambda item: item[0].count(".")) if found else None


def _freeze(model: torch.nn.Module, parts: FamilyParts, part: str, setting: str) -> int:
    parameters = part_parameters(model, parts, part)
    if not parameters:
        raise ValueError(f"{type(model).__name__} has no vision {part} (its traced parts: {parts}); {setting} "
                         "needs one: set it to false")
    for parameter in parameters.values():
        parameter.requires_grad_(False)
    return sum(p.numel() for p in parameters.values())


def freeze_vision_tower(model: torch.nn.Module, parts: FamilyParts) -> int:
    """Turn gradients off for every vision-encoder parameter (not the projector's); returns how many
    elements were frozen."""
    return _freeze(model, parts, "encoder", "freeze_vision_tower")


def freeze_projector(model: torch.nn.Module, parts: FamilyParts) -> int:
    """Turn gradients off for every projector parameter; returns how many elements were frozen."""
    return _freeze(model, parts, "projector", "freeze_projector")


def freeze_vision_parts(model: torch.nn.Module, settings: TrainingSettings, parts: FamilyParts) -> int:
    """The encoder frozen when ``settings.freeze_vision_tower``, the projector when ``settings.freeze_projector``;
    returns how many elements were frozen."""
    return ((freeze_vision_tower(model, parts) if settings.freeze_vision_tower else 0)
            + (freeze_projector(model, parts) if settings.freeze_projector else 0))
