"""Per-token log-probabilities (and entropy) of chosen tokens, fused with the LM head.

For policy-gradient steps (GRPO / PPO) the quantity is ``log pi(y_t | x, y_<t)`` for every
counted response token, with ``logits / temperature`` as in sampling. As in
:mod:`aerorl_ops.losses.fused_cross_entropy`, counted rows are selected before the LM head
and processed ``chunk_size`` rows at a time, so [B, T, V] logits never exist. Unlike the
mean cross-entropy, the upstream gradient here is a per-token vector (advantages, ratios,
KL terms), so the gradient cannot be precomputed in forward: forward keeps only the
per-row log-sum-exp, and backward recomputes each chunk's logits (two extra LM-head
matmuls over the counted rows, the memory cost stays one [chunk_size, V] block).

Targets are aligned like the loss labels: ``hidden_states[b, t]`` scores ``target_ids[b, t]``
(already shifted). The per-token entropy ``H = -sum_v p_v log p_v`` is differentiable too (an
entropy bonus): with ``z = logits / temperature``, ``dH/dz_v = -p_v (log p_v + H)``. Its backward
holds a second [chunk_size, V] block, and only runs when the entropy is part of the loss.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from aerorl_ops.losses.fused_cross_entropy import (
    DEFAULT_CHUNK_SIZE,
    accumulation_dtype,
    check_lm_head_inputs,
    chunk_logits,
    select_rows,
)


class TokenLogprobs(NamedTuple):
    """Per counted token, in row-major order of ``mask`` (the order of ``x[mask]``)."""

    logprobs: torch.Tensor  # [N] log p(target), differentiable
    entropy: torch.Tensor  # [N] entropy of the tempered distribution, differentiable


class _ChunkedLinearLogprobs(torch.autograd.Function):
    """``log_softmax(F.linear(hidden, weight, bias) / temperature)[target]`` per row, recomputed in backward."""

    @staticmethod
    def forward(
        ctx,
        hidden: torch.Tensor,  # [N, H]
        weight: torch.Tensor,  # [V, H]
        bias: torch.Tensor | None,  # [V] or None
        targets: torch.Tensor,  # [N] int64
        chunk_size: int,
        temperature: float,
        out_dtype: torch.dtype,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        acc = accumulation_dtype(hidden.dtype)
        n_rows = hidden.shape[0]
        logprobs = torch.empty(n_rows, dtype=acc, device=hidden.device)  # [N]
        entropy = torch.empty(n_rows, dtype=acc, device=hidden.device)  # [N]
        lse = torch.empty(n_rows, dtype=acc, device=hidden.device)  # [N]
        for start in range(0, n_rows, chunk_size):
            rows = slice(start, start + chunk_size)
            z = chunk_logits(hidden[rows], weight, bias).div_(temperature)  # [C, V]
            lse[rows] = torch.logsumexp(z, dim=1)  # [C]
            z.sub_(lse[rows, None])  # [C, V] log p
            logprobs[rows] = z.gather(1, targets[rows, None]).squeeze(1)  # [C]
            entropy[rows] = -z.exp().mul_(z).sum(dim=1)  # [C] -sum p log p
            del z  # one [C, V] block alive at a time
        ctx.save_for_backward(hidden, weight, bias, targets, lse, entropy)
        ctx.chunk_size = chunk_size
        ctx.temperature = temperature
        ctx.set_materialize_grads(False)  # an output outside the loss gets None, not zeros
        return logprobs.to(out_dtype), entropy.to(out_dtype)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_logprobs: torch.Tensor | None, grad_entropy: torch.Tensor | None):
        hidden, weight, bias, targets, lse, entropy = ctx.saved_tensors
        want_h, want_w, want_b = ctx.needs_input_grad[:3]
        acc = lse.dtype
        grad_hidden = torch.empty_like(hidden) if want_h else None  # [N, H]
        grad_weight = torch.zeros(weight.shape, dtype=acc, device=weight.device) if want_w else None  # [V, H]
        grad_bias = torch.zeros(weight.shape[0], dtype=acc, device=weight.device) if want_b else None  # [V]
        g = grad_logprobs.to(acc) if grad_logprobs is not None else torch.zeros_like(lse)  # [N]
        g_entropy = grad_entropy.to(acc) if grad_entropy is not None else None  # [N]
        for start in range(0, hidden.shape[0], ctx.chunk_size):
            rows = slice(start, start + ctx.chunk_size)
            h = hidden[rows]  # [C, H]
            g_rows = g[rows, None]  # [C, 1]
            z = chunk_logits(h, weight, bias).div_(ctx.temperature)  # [C, V]
            z.sub_(lse[rows, None])  # [C, V] log p
            if g_entropy is None:
                z.exp_().mul_(g_rows.neg())  # [C, V] -g * p
            else:
                p = z.exp()  # [C, V]
                z.add_(entropy[rows, None]).mul_(g_entropy[rows, None].neg())  # [C, V] -g_H * (log p + H)
                z.sub_(g_rows).mul_(p)  # [C, V] -g * p - g_H * p * (log p + H)
                del p
            z.div_(ctx.temperature)
            z.scatter_add_(1, targets[rows, None], g_rows / ctx.temperature)  # [C, V] + g * onehot / temperature
            if want_h:
                grad_hidden[rows] = z.to(weight.dtype) @ weight  # [C, H]
            if want_w:
                grad_weight.addmm_(z.T, h.to(acc))  # [V, H] += [V, C] @ [C, H]
            if want_b:
                grad_bias += z.sum(dim=0)  # [V]
            del z  # one [C, V] block alive at a time
        if grad_weight is not None:
            grad_weight = grad_weight.to(weight.dtype)
        if grad_bias is not None:
            grad_bias = grad_bias.to(bias.dtype)
        return grad_hidden, grad_weight, grad_bias, None, None, None, None


def fused_token_logprobs(
    hidden_states: torch.Tensor,
    lm_head_weight: torch.Tensor,
    target_ids: torch.Tensor,
    mask: torch.Tensor,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    temperature: float = 1.0,
    lm_head_bias: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
) -> TokenLogprobs:
    """Log-probs and entropies of ``target_ids`` at mask-True positions, never building [B, T, V].

    hidden_states: [B, T, H]; lm_head_weight: [V, H]; lm_head_bias: [V] or None;
    target_ids: [B, T] int, already shifted (``hidden_states[b, t]`` scores ``target_ids[b, t]``);
    values at mask-False positions are never read, so padding ids are fine there;
    mask: [B, T] bool, True = counted. Returns :class:`TokenLogprobs` with N = mask.sum() rows, in
    ``out_dtype`` (None: hidden_states' dtype; bfloat16 hidden states with ``out_dtype=torch.float32`` keep
    the float32 the log-softmax is computed in, for PPO ratios of log-prob differences).

    >>> hidden = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    >>> weight = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> out = fused_token_logprobs(hidden, weight, torch.tensor([[0, 0]]), torch.tensor([[True, False]]))
    >>> out.logprobs.shape, round(out.logprobs.item(), 4)
    (torch.Size([1]), -0.3133)
    """
    check_lm_head_inputs(hidden_states, lm_head_weight, chunk_size)
    if target_ids.shape != hidden_states.shape[:2] or mask.shape != hidden_states.shape[:2]:
        raise ValueError(
            f"target_ids {tuple(target_ids.shape)} and mask {tuple(mask.shape)} must both have the "
            f"batch/seq shape of hidden_states {tuple(hidden_states.shape[:2])}"
        )
    if temperature <= 0:
        raise ValueError(f"temperature must be positive; got {temperature}")
    rows, targets = select_rows(hidden_states, target_ids, mask.to(torch.bool), lm_head_weight.shape[0])  # [N, H], [N]
    logprobs, entropy = _ChunkedLinearLogprobs.apply(
        rows, lm_head_weight, lm_head_bias, targets.long(), chunk_size, float(temperature),
        out_dtype or hidden_states.dtype,
    )  # [N], [N]
    return TokenLogprobs(logprobs=logprobs, entropy=entropy)
