"""The vision encoder and projector of a VLM, frozen on request (verl's ``freeze_vision_tower``).

Which modules they are comes from ``aerorl_ops.models.family_parts`` (by ``config.model_type``).
``freeze_vision_tower`` means the **encoder only** in every family (Qwen's ``visual`` without its
``merger``, Idefics3's ``vision_model``, LLaVA's / Gemma 3's / InternVL's ``vision_tower``); the
projector is frozen by ``freeze_projector``. A peft wrapper (LoRA) only prefixes the names, so the
same search finds them there.
"""

from __future__ import annotations

import torch

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.models.family_parts import family_parts, part_of, part_parameters


def find_vision_tower(model: torch.nn.Module) -> tuple[str, torch.nn.Module] | None:
    """``(qualified name, module)`` of the outermost module of the model's vision encoder, or None."""
    parts = family_parts(model)
    found = [(name, module) for name, module in model.named_modules() if name and part_of(name, parts) == "encoder"]
    return min(found, key=lambda item: item[0].count(".")) if found else None


def _freeze(model: torch.nn.Module, part: str, setting: str) -> int:
    parameters = part_parameters(model, part)
    if not parameters:
        raise ValueError(f"{type(model).__name__} has no vision {part} (see aerorl_ops.models.family_parts); "
                         f"{setting} needs one: set it to false")
    for parameter in parameters.values():
        parameter.requires_grad_(False)
    return sum(p.numel() for p in parameters.values())


def freeze_vision_tower(model: torch.nn.Module) -> int:
    """Turn gradients off for every vision-encoder parameter (not the projector's); returns how many
    elements were frozen."""
    return _freeze(model, "encoder", "freeze_vision_tower")


def freeze_projector(model: torch.nn.Module) -> int:
    """Turn gradients off for every projector parameter; returns how many elements were frozen."""
    return _freeze(model, "projector", "freeze_projector")


def freeze_vision_parts(model: torch.nn.Module, settings: TrainingSettings) -> int:
    """The encoder frozen when ``settings.freeze_vision_tower``, the projector when ``settings.freeze_projector``;
    returns how many elements were frozen."""
    return ((freeze_vision_tower(model) if settings.freeze_vision_tower else 0)
            + (freeze_projector(model) if settings.freeze_projector else 0))
