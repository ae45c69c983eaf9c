"""Find the positions of vision tokens in a tokenized VLM batch."""

from __future__ import annotations

import torch


def vision_token_ids(config) -> tuple[int, ...]:
    """The ids a VLM config uses for image/video placeholder tokens (those the vision tower fills)."""
    names = ("image_token_id", "video_token_id", "image_token_index", "video_token_index")
    return tuple(sorted({getattr(config, name) for name in names if getattr(config, name, None) is not None}))


def vision_token_mask(input_ids: torch.Tensor, config) -> torch.Tensor:
    """Bool mask, True where ``input_ids`` holds a vision placeholder token.

    input_ids: [B, T] long -> [B, T] bool
    """
    ids = torch.tensor(vision_token_ids(config), device=input_ids.device)
    return torch.isin(input_ids, ids)  # [B, T]
