"""The vision tower of a VLM: found by name, and frozen (verl's ``freeze_vision_tower``).

The tower is the shallowest submodule named one of :data:`VISION_TOWER_NAMES`: Qwen2-VL /
Qwen2.5-VL keep it at ``model.visual`` (transformers >= 4.52; ``visual`` before), LLaVA-style
models at ``vision_tower``, Idefics / SmolVLM at ``vision_model``. A peft wrapper (LoRA) only
prefixes the names, so the same search finds it there.
"""

from __future__ import annotations

import torch

VISION_TOWER_NAMES = ("visual", "vision_tower", "vision_model")


def find_vision_tower(model: torch.nn.Module) -> tuple[str, torch.nn.Module] | None:
    """``(qualified name, module)`` of the model's vision tower, or None when it has none."""
    found = [(name, module) for name, module in model.named_modules()
             if name.rsplit(".", 1)[-1] in VISION_TOWER_NAMES]
    return min(found, key=lambda item: item[0].count(".")) if found else None


def freeze_vision_tower(model: torch.nn.Module) -> int:
    """Turn gradients off for every vision-tower parameter; returns how many elements were frozen."""
    found = find_vision_tower(model)
    if found is None:
        raise ValueError(f"{type(model).__name__} has no vision tower (no submodule named "
                         f"{' / '.join(VISION_TOWER_NAMES)}); freeze_vision_tower needs one: set it to false")
    tower = found[1]
    tower.requires_grad_(False)
    return sum(p.numel() for p in tower.parameters())
