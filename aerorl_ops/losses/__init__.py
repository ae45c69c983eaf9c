"""Losses and their masking convention (True = counted in the loss)."""

from aerorl_ops.losses.fused_cross_entropy import (
    DEFAULT_CHUNK_SIZE,
    FusedMaskedCrossEntropyLoss,
    fused_masked_cross_entropy,
)
from aerorl_ops.losses.masked_cross_entropy import (
    CrossEntropyStats,
    MaskedCrossEntropyLoss,
    masked_cross_entropy_loss,
    text_token_mask,
)
from aerorl_ops.losses.masking import masked_mean
from aerorl_ops.losses.token_logprobs import TokenLogprobs, fused_token_logprobs

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "CrossEntropyStats",
    "FusedMaskedCrossEntropyLoss",
    "MaskedCrossEntropyLoss",
    "TokenLogprobs",
    "fused_masked_cross_entropy",
    "fused_token_logprobs",
    "masked_cross_entropy_loss",
    "masked_mean",
    "text_token_mask",
]
