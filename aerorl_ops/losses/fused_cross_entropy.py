"""Masked cross-entropy fused with the LM head, chunked so [B, T, V] logits never exist.

Idea: a VLM batch is mostly vision tokens (70% on Qwen2-VL-style inputs) that the loss
excludes anyway, and the vocabulary is large (V = 151,936), so the naive path
``logits = hidden @ W.T`` then mask spends most of its memory and FLOPs on rows it throws
away. Here the counted rows are selected *before* the LM head, and the remaining ``N`` rows
go through it ``chunk_size`` at a time. Each chunk's gradient is computed during the forward
pass (the "gradient-in-forward" trick of Liger Kernel's fused linear cross-entropy,
https://arxiv.org/abs/2410.10989): for mean NLL, ``dL/dz = (softmax(z) - onehot(y)) / N``
does not depend on anything downstream, so nothing needs to be recomputed in backward and
the only [*, V] tensor alive at a time is one [chunk_size, V] block.

Semantics match :func:`aerorl_ops.losses.masked_cross_entropy_loss` exactly: labels are
already shifted (``hidden_states[b, t]`` predicts ``labels[b, t]``), vision positions and
``ignore_index`` labels are excluded, mean over counted tokens, 0 (and zero gradients) when
none are counted.

Frozen head (LoRA, where the LM head is never adapted): when ``lm_head_weight`` (and the bias)
do not require grad, only ``dL/dhidden`` [N, H] is computed and kept; no [V, H] weight-gradient
buffer is allocated, so the loss's added memory is about one [chunk_size, V] block.

Limits: one backward pass per forward (the precomputed gradients are handed over, not
kept; ``retain_graph`` then a second backward raises); no double backward. For half or
bfloat16 inputs the logits and the weight gradient are accumulated in float32 (the weight
gradient buffer is then float32 [V, H] until backward casts it).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from aerorl_ops.losses.masked_cross_entropy import (
    CrossEntropyStats,
    check_loss_inputs,
    cross_entropy_stats,
    text_token_mask,
)

DEFAULT_CHUNK_SIZE = 512

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for half / bfloat16, otherwise the input dtype (float32 stays float32, float64 stays float64)."""
    return torch.float32 if dtype in _LOW_PRECISION else dtype


def check_lm_head_inputs(hidden_states: torch.Tensor, lm_head_weight: torch.Tensor, chunk_size: int) -> None:
    """Shapes shared by the fused LM-head paths: hidden [B, T, H], weight [V, H], chunk >= 1 rows."""
    if hidden_states.ndim != 3:
        raise ValueError(f"hidden_states must have shape [batch, seq, hidden]; got {tuple(hidden_states.shape)}")
    if lm_head_weight.ndim != 2 or lm_head_weight.shape[1] != hidden_states.shape[2]:
        raise ValueError(
            f"lm_head_weight must have shape [vocab, {hidden_states.shape[2]}]; got {tuple(lm_head_weight.shape)}"
        )
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive number of rows; got {chunk_size}")


def chunk_logits(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """LM head on one chunk, upcast for a stable softmax. hidden: [C, H] -> [C, V]."""
    logits = F.linear(hidden, weight, bias)  # [C, V]
    return logits.to(accumulation_dtype(logits.dtype))  # [C, V]


def select_rows(
    hidden_states: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor, vocab_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows and targets where ``mask`` is True, checking targets are valid vocabulary ids.

    hidden_states: [B, T, H]; targets: [B, T] int; mask: [B, T] bool.
    Returns hidden [N, H] (differentiable w.r.t. hidden_states) and targets [N].
    """
    rows = hidden_states[mask]  # [N, H]
    row_targets = targets[mask]  # [N]
    if row_targets.numel() and (row_targets.min() < 0 or row_targets.max() >= vocab_size):
        raise ValueError(
            f"targets at counted positions must lie in [0, {vocab_size}); got values in "
            f"[{int(row_targets.min())}, {int(row_targets.max())}]. Mark other positions False in the mask "
            "(or ignore_index in labels)."
        )
    return rows, row_targets


class _ChunkedLinearCrossEntropy(torch.autograd.Function):
    """Mean NLL of ``F.linear(hidden, weight, bias)`` rows, gradients computed in forward."""

    @staticmethod
    def forward(
        ctx,
        hidden: torch.Tensor,  # [N, H]
        weight: torch.Tensor,  # [V, H]
        bias: torch.Tensor | None,  # [V] or None
        targets: torch.Tensor,  # [N] int64
        chunk_size: int,
        compute_grads: bool,
    ) -> torch.Tensor:
        n_rows = hidden.shape[0]
        acc = accumulation_dtype(hidden.dtype)
        want_h, want_w, want_b = [compute_grads and need for need in ctx.needs_input_grad[:3]]
        grad_hidden = torch.empty_like(hidden) if want_h else None  # [N, H]
        grad_weight = torch.zeros(weight.shape, dtype=acc, device=weight.device) if want_w else None  # [V, H]
        grad_bias = torch.zeros(weight.shape[0], dtype=acc, device=weight.device) if want_b else None  # [V]
        loss_sum = torch.zeros((), dtype=acc, device=hidden.device)  # []
        scale = 1.0 / max(n_rows, 1)

        for start in range(0, n_rows, chunk_size):
            h = hidden[start : start + chunk_size]  # [C, H]
            y = targets[start : start + chunk_size, None]  # [C, 1]
            z = chunk_logits(h, weight, bias)  # [C, V]
            target_logit = z.gather(1, y)  # [C, 1]
            row_max = z.amax(dim=1, keepdim=True)  # [C, 1]
            z.sub_(row_max).exp_()  # [C, V] exp(z - max), in place
            sum_exp = z.sum(dim=1, keepdim=True)  # [C, 1]
            loss_sum += (row_max + sum_exp.log() - target_logit).sum()  # [] sum of logsumexp - z_y
            if want_h or want_w or want_b:
                z.div_(sum_exp)  # [C, V] softmax
                z.scatter_add_(1, y, torch.full_like(target_logit, -1.0))  # [C, V] softmax - onehot
                z.mul_(scale)  # [C, V] dL/dz for the mean
            if want_h:
                grad_hidden[start : start + chunk_size] = z.to(weight.dtype) @ weight  # [C, H]
            if want_w:
                grad_weight.addmm_(z.T, h.to(acc))  # [V, H] += [V, C] @ [C, H]
            if want_b:
                grad_bias += z.sum(dim=0)  # [V]
            del z  # free this block before the next one is allocated: one [C, V] block at a time

        ctx.grads = (grad_hidden, grad_weight, grad_bias)
        ctx.dtypes = (hidden.dtype, weight.dtype, None if bias is None else bias.dtype)
        return (loss_sum * scale).to(hidden.dtype)  # []

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_loss: torch.Tensor):
        if not hasattr(ctx, "grads"):
            raise RuntimeError(
                "fused_masked_cross_entropy supports one backward pass per forward; "
                "recompute the loss instead of using retain_graph=True"
            )
        grads = ctx.grads
        del ctx.grads  # hand the buffers over so autograd can adopt them without a copy
        out = []
        for grad, dtype in zip(grads, ctx.dtypes, strict=True):
            if grad is not None:
                if not bool(grad_loss == 1):
                    grad.mul_(grad_loss)
                grad = grad.to(dtype)
            out.append(grad)
        return out[0], out[1], out[2], None, None, None


def fused_masked_cross_entropy(
    hidden_states: torch.Tensor,
    lm_head_weight: torch.Tensor,
    labels: torch.Tensor,
    vision_mask: torch.Tensor,
    ignore_index: int = -100,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    lm_head_bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean next-token NLL over text tokens, computing the LM head only on counted rows.

    hidden_states: [B, T, H] final hidden states (before the LM head);
    lm_head_weight: [V, H]; lm_head_bias: [V] or None;
    labels: [B, T] int, already shifted (``hidden_states[b, t]`` predicts ``labels[b, t]``);
    vision_mask: [B, T] bool, True = vision token (excluded).
    Returns a scalar equal to ``masked_cross_entropy_loss(F.linear(hidden_states, W, b), ...)``
    with the same gradients, holding at most one [chunk_size, V] logits block at a time.

    >>> hidden = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    >>> weight = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> loss = fused_masked_cross_entropy(hidden, weight, torch.tensor([[0, 0]]), torch.tensor([[False, True]]))
    >>> round(loss.item(), 4)  # -log(e^1 / (e^1 + e^0)), only position 0 counted
    0.3133
    """
    check_lm_head_inputs(hidden_states, lm_head_weight, chunk_size)
    check_loss_inputs(hidden_states.shape[:2], labels, "hidden_states")
    mask = text_token_mask(labels, vision_mask, ignore_index)  # [B, T] bool
    rows, targets = select_rows(hidden_states, labels, mask, lm_head_weight.shape[0])  # [N, H], [N]
    compute_grads = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (rows, lm_head_weight, lm_head_bias)
    )
    return _ChunkedLinearCrossEntropy.apply(
        rows, lm_head_weight, lm_head_bias, targets.long(), chunk_size, compute_grads
    )  # []


class FusedMaskedCrossEntropyLoss(nn.Module):
    """Module form of :func:`fused_masked_cross_entropy` (LM head + masked mean NLL, chunked).

    Args:
        ignore_index: label value excluded from the loss.
        chunk_size: rows of the LM head computed at once; peak extra memory is about
            ``chunk_size * V`` floats, plus the [V, H] weight gradient when the weight requires grad.

    forward(hidden_states [B, T, H], lm_head_weight [V, H], labels [B, T] already shifted,
    vision_mask [B, T] bool, lm_head_bias [V] | None) returns ``(loss [], CrossEntropyStats)``.
    """

    def __init__(self, ignore_index: int = -100, chunk_size: int = DEFAULT_CHUNK_SIZE) -> None:
        super().__init__()
        self.ignore_index = ignore_index
        self.chunk_size = chunk_size

    def forward(
        self,
        hidden_states: torch.Tensor,
        lm_head_weight: torch.Tensor,
        labels: torch.Tensor,
        vision_mask: torch.Tensor,
        lm_head_bias: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, CrossEntropyStats]:
        loss = fused_masked_cross_entropy(
            hidden_states, lm_head_weight, labels, vision_mask, self.ignore_index, self.chunk_size, lm_head_bias
        )  # []
        return loss, cross_entropy_stats(labels, vision_mask, self.ignore_index)
