"""Vision-token masks: where a tokenized batch holds the tokens a model fills with image or video features.

Which token ids those are is read from the model itself (``vision_trace``: the positions its own forward
scatters features into, on a probe prompt), and held by ``LoadedVLM.vision``; a benchmark record's
``vision_tokens``, the training mask and the vLLM backend's count all use it. The processor's own image
token is used only for a model that reads its images by cross-attention (Llama 3.2 Vision's ``<|image|>``),
which fills no position.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


class UnknownVisionTokensError(ValueError):
    """A model's vision tokens cannot be identified; one line naming the model."""


def _known(token_id, tokenizer) -> bool:
    return isinstance(token_id, int) and token_id >= 0 and token_id != getattr(tokenizer, "unk_token_id", None)


def processor_image_token_ids(processor, model: str = "the model") -> tuple[int, ...]:
    """The ids of ``processor``'s image tokens (``image_token_ids``, else its ``image_token`` text): where a
    cross-attention model's images are. ``model`` names the model in the error raised when there are none."""
    tokenizer = getattr(processor, "tokenizer", None)
    found = {token_id for token_id in getattr(processor, "image_token_ids", None) or () if _known(token_id, tokenizer)}
    if not found and tokenizer is not None and isinstance(getattr(processor, "image_token", None), str):
        token_id = tokenizer.convert_tokens_to_ids(processor.image_token)
        found = {token_id} if _known(token_id, tokenizer) else set()
    if not found:
        raise UnknownVisionTokensError(
            f"cannot tell which tokens of {model} are vision tokens: it fills no position with image features "
            f"and its processor {type(processor).__name__} names no image token its tokenizer knows "
            "(image_token_ids / image_token); check the checkpoint's processor and tokenizer files")
    return tuple(sorted(found))


def vision_token_mask(input_ids: torch.Tensor, vision_ids: Sequence[int]) -> torch.Tensor:
    """Bool mask, True where ``input_ids`` holds one of ``vision_ids`` (``LoadedVLM.vision.token_ids``).

    input_ids: [B, T] long -> [B, T] bool

    >>> vision_token_mask(torch.tensor([[5, 9, 9, 2]]), (9,)).tolist()
    [[False, True, True, False]]
    """
    ids = torch.tensor(list(vision_ids), dtype=input_ids.dtype, device=input_ids.device)
    return torch.isin(input_ids, ids)  # [B, T]
