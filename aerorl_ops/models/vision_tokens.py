"""Find the positions of vision tokens in a tokenized VLM batch, from the model's processor.

The processor knows its vision tokens: ``image_token_ids`` / ``video_token_ids`` are what
transformers marks as image / video in the ``mm_token_type_ids`` (Gemma 3: ``token_type_ids``) a
processor returns: the placeholder tokens an image expands into (Gemma 3's soft tokens, Qwen's
``<|image_pad|>``, LLaVA's ``<image>``; InternVL's also counts its ``<img>`` / ``</img>``
delimiters, Aya Vision's its start-of-image, tile and end-of-image tokens). A processor that names
none falls back to its ``image_token`` text. A model whose vision tokens cannot be identified is an
error naming it, never an all-False mask. A benchmark record's ``vision_tokens`` and the training mask
are both this count.
"""

from __future__ import annotations

from collections.abc import Sequence

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


def vision_token_mask(input_ids: torch.Tensor, vision_ids: Sequence[int]) -> torch.Tensor:
    """Bool mask, True where ``input_ids`` holds one of ``vision_ids`` (``vision_token_ids(processor)``).

    input_ids: [B, T] long -> [B, T] bool
    """
    ids = torch.tensor(list(vision_ids), dtype=input_ids.dtype, device=input_ids.device)
    return torch.isin(input_ids, ids)  # [B, T]
