"""Find the positions of vision tokens in a tokenized VLM batch, from the model's processor.

The processor knows its vision tokens: ``image_token_ids`` / ``video_token_ids`` are what
transformers marks as image / video in the ``mm_token_type_ids`` (Gemma 3: ``token_type_ids``) a
processor returns: the placeholder tokens an image expands into (Gemma 3's soft tokens, Qwen's
``<|image_pad|>``, LLaVA's ``<image>``; InternVL's also counts its ``<img>`` / ``</img>``
delimiters). A processor that names none falls back to its ``image_token`` text. A model whose
vision tokens cannot be identified is an error naming it, never an all-False mask.
"""

from __future__ import annotations

import torch


class UnknownVisionTokensError(ValueError):
    """The processor of a model names no vision token that its tokenizer knows."""


def _known(token_id, tokenizer) -> bool:
    return isinstance(token_id, int) and token_id >= 0 and token_id != getattr(tokenizer, "unk_token_id", None)


def vision_token_ids(processor, model: str = "the model") -> tuple[int, ...]:
    """The ids of ``processor``'s image and video placeholder tokens (what its vision tower fills).

    ``model`` names the model in the error raised when there are none.
    """
    tokenizer = getattr(processor, "tokenizer", None)
    ids = [*(getattr(processor, "image_token_ids", None) or ()), *(getattr(processor, "video_token_ids", None) or ())]
    found = {token_id for token_id in ids if _known(token_id, tokenizer)}
    if not found and tokenizer is not None and isinstance(getattr(processor, "image_token", None), str):
        token_id = tokenizer.convert_tokens_to_ids(processor.image_token)
        found = {token_id} if _known(token_id, tokenizer) else set()
    if not found:
        raise UnknownVisionTokensError(
            f"cannot tell which tokens of {model} are vision tokens: its processor "
            f"{type(processor).__name__} names no image token its tokenizer knows (image_token_ids / image_token); "
            "check the checkpoint's processor and tokenizer files")
    return tuple(sorted(found))


def vision_token_mask(input_ids: torch.Tensor, vision_ids) -> torch.Tensor:
    """Bool mask, True where ``input_ids`` holds a vision placeholder token.

    ``vision_ids``: the ids (``vision_token_ids(processor)``), or a model config, whose
    ``image_token_id`` / ``video_token_id`` (or ``*_index``) attributes are read (training's callers,
    until they pass the processor's ids).

    input_ids: [B, T] long -> [B, T] bool
    """
    if not isinstance(vision_ids, (tuple, list)):
        vision_ids = config_vision_token_ids(vision_ids)
    ids = torch.tensor(vision_ids, dtype=input_ids.dtype, device=input_ids.device)
    return torch.isin(input_ids, ids)  # [B, T]


def config_vision_token_ids(config) -> tuple[int, ...]:
    """The image/video placeholder ids a model config names; an error when it names none."""
    names = ("image_token_id", "video_token_id", "image_token_index", "video_token_index")
    ids = tuple(sorted({getattr(config, name) for name in names if getattr(config, name, None) is not None}))
    if not ids:
        raise UnknownVisionTokensError(
            f"cannot tell which tokens are vision tokens: the {type(config).__name__} names none of {names}; "
            "pass the ids of the model's processor (vision_token_ids(processor))")
    return ids
