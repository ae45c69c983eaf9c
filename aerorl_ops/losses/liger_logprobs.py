"""Per-token log-probs and entropies through Liger Kernel's fused linear scaled cross-entropy: an optional backend
(``logprob_kernel = "liger"``) beside our own chunked path (``losses.token_logprobs``), to measure one against the
other on a GPU and keep the faster.

Liger's ``LigerFusedLinearScaledCrossEntropyFunction`` (liger-kernel >= 0.8.5, its RL entry point) computes
``-log softmax(h W^T / temperature)[y]`` and the tempered distribution's entropy per row, both differentiable, as
ours does: a CuTe DSL kernel on Hopper (needs ``liger-kernel[cutedsl]``), a chunked PyTorch path elsewhere.
liger-kernel is not a dependency of this project: it needs Triton and CUDA, and is imported only when asked for.
"""

from __future__ import annotations

import torch
from torch import nn

from aerorl_ops.losses.token_logprobs import TokenLogprobs

LIGER_REQUIREMENT = "liger-kernel>=0.8.5"


def liger_scaled_cross_entropy():
    """Liger's fused linear scaled cross-entropy function, or an ImportError saying what to install."""
    try:
        from liger_kernel.ops.fused_linear_scaled_cross_entropy import LigerFusedLinearScaledCrossEntropyFunction
    except ImportError as error:
        raise ImportError(f"logprob_kernel = \"liger\" needs {LIGER_REQUIREMENT} (with Triton, on CUDA; "
                          f"liger-kernel[cutedsl] for its Hopper kernel): {error}; or set logprob_kernel = "
                          "\"aerorl\"") from error
    return LigerFusedLinearScaledCrossEntropyFunction


def liger_head_logprobs(head: nn.Module, hidden: torch.Tensor, targets: torch.Tensor,
                        temperature: float = 1.0) -> TokenLogprobs:
    """Log-probs and entropies of ``targets`` [N] under the LM ``head`` (a bias-free linear layer [V, H]) at
    ``hidden`` [N, H], by Liger's kernel: [N] each, float32. The head's weight computes in ``hidden``'s dtype (a
    bfloat16 copy under autocast, whose gradient reaches the float32 weight)."""
    if getattr(head, "bias", None) is not None:
        raise ValueError("logprob_kernel = \"liger\" takes a bias-free LM head; this model's has a bias: set "
                         "logprob_kernel = \"aerorl\"")
    function = liger_scaled_cross_entropy()
    nll, entropy = function.apply(hidden, head.weight.to(hidden.dtype), targets.long(), temperature=float(temperature),
                                  return_entropy=True)  # [N], [N]
    return TokenLogprobs(-nll.float(), entropy.float())
