"""Next-token cross-entropy over text tokens only (vision and ``ignore_index`` excluded).

Follows AeroRL's ``masked_cross_entropy_loss`` semantics:

* **Labels are already shifted.** ``logits[b, t]`` is scored against ``labels[b, t]``;
  nothing is shifted inside the loss. The caller builds ``labels[b, t] = input_ids[b, t + 1]``
  (or uses a processor that does), and ``vision_mask`` is aligned with ``labels``:
  ``vision_mask[b, t]`` is True when the *target* at ``t`` is a vision token.
* **Mean over counted tokens.** A position is counted when it is not a vision token and its
  label is not ``ignore_index`` (the project convention: True = counted). The loss is the
  sum of per-token negative log-likelihoods divided by the number of counted tokens.

One deliberate difference from AeroRL: when no token is counted the loss is ``0`` with zero
gradients (via :func:`masked_mean`), where ``F.cross_entropy`` would return NaN.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from aerorl_ops.losses.masking import masked_mean


class CrossEntropyStats(NamedTuple):
    """Detached counts that come with a masked cross-entropy loss."""

    num_tokens: torch.Tensor  # [] int64, positions counted in the loss
    num_vision_tokens: torch.Tensor  # [] int64, positions excluded as vision tokens


def text_token_mask(labels: torch.Tensor, vision_mask: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """Loss mask (True = counted): not a vision token and label not ``ignore_index``.

    labels: [B, T] int; vision_mask: [B, T] bool (True = vision token). Returns [B, T] bool.

    >>> text_token_mask(torch.tensor([[1, 2, -100, 4]]), torch.tensor([[True, False, False, True]]))
    tensor([[False,  True, False, False]])
    """
    if vision_mask.shape != labels.shape:
        raise ValueError(
            f"vision_mask has shape {tuple(vision_mask.shape)} but labels has shape {tuple(labels.shape)}; "
            "they must match (vision_mask is aligned with the already-shifted labels)"
        )
    return ~vision_mask.to(torch.bool) & labels.ne(ignore_index)  # [B, T]


def check_loss_inputs(leading_shape: torch.Size, labels: torch.Tensor, what: str) -> None:
    """Raise a ValueError naming the argument when ``labels`` [B, T] does not match ``what``."""
    if labels.ndim != 2:
        raise ValueError(f"labels must have shape [batch, seq]; got {tuple(labels.shape)}")
    if tuple(leading_shape) != tuple(labels.shape):
        raise ValueError(
            f"{what} has batch/seq dims {tuple(leading_shape)} but labels has shape {tuple(labels.shape)}; "
            "labels must already be shifted to align with each position"
        )


def masked_cross_entropy_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    vision_mask: torch.Tensor,
    ignore_index: int = -100,
) -> torch.Tensor:
    """Mean next-token NLL over text tokens, from full logits.

    logits: [B, T, V] float; labels: [B, T] int, already shifted (``logits[b, t]`` predicts
    ``labels[b, t]``); vision_mask: [B, T] bool, True = vision token (excluded).
    Returns a scalar: mean NLL over counted positions, 0 if none are counted.

    >>> logits = torch.tensor([[[0.0, 0.0], [0.0, 0.0]]])
    >>> masked_cross_entropy_loss(logits, torch.tensor([[0, 1]]), torch.tensor([[False, True]]))
    tensor(0.6931)
    """
    if logits.ndim != 3:
        raise ValueError(f"logits must have shape [batch, seq, vocab]; got {tuple(logits.shape)}")
    check_loss_inputs(logits.shape[:2], labels, "logits")
    mask = text_token_mask(labels, vision_mask, ignore_index)  # [B, T] bool
    safe_labels = labels.masked_fill(~mask, ignore_index)  # [B, T]
    nll = F.cross_entropy(
        logits.reshape(-1, logits.size(-1)),  # [B*T, V]
        safe_labels.reshape(-1),  # [B*T]
        ignore_index=ignore_index,
        reduction="none",
    )  # [B*T], exactly 0 at excluded positions
    return masked_mean(nll, mask.reshape(-1))  # []


class MaskedCrossEntropyLoss(nn.Module):
    """Module form of :func:`masked_cross_entropy_loss` (AeroRL's text-only SFT loss).

    Args:
        ignore_index: label value excluded from the loss.

    forward(logits [B, T, V], labels [B, T] already shifted, vision_mask [B, T] bool)
    returns ``(loss [], CrossEntropyStats)``.
    """

    def __init__(self, ignore_index: int = -100) -> None:
        super().__init__()
        self.ignore_index = ignore_index

    def forward(
        self, logits: torch.Tensor, labels: torch.Tensor, vision_mask: torch.Tensor
    ) -> tuple[torch.Tensor, CrossEntropyStats]:
        loss = masked_cross_entropy_loss(logits, labels, vision_mask, self.ignore_index)  # []
        return loss, cross_entropy_stats(labels, vision_mask, self.ignore_index)


def cross_entropy_stats(labels: torch.Tensor, vision_mask: torch.Tensor, ignore_index: int) -> CrossEntropyStats:
    """Counts of counted and vision positions, detached."""
    with torch.no_grad():
        mask = text_token_mask(labels, vision_mask, ignore_index)  # [B, T] bool
        return CrossEntropyStats(
            num_tokens=mask.sum(),  # []
            num_vision_tokens=vision_mask.to(torch.bool).sum(),  # []
        )
