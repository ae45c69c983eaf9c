"""The optional Liger Kernel backend of the LM head's log-probs (``losses.liger_logprobs``): where liger-kernel and
CUDA are there, it gives our kernel's log-probs, entropies and gradients; where it is not installed, asking for it
fails in one line that says what to install and how to go without it."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from aerorl_ops.losses import fused_token_logprobs
from aerorl_ops.losses.liger_logprobs import liger_head_logprobs

LIGER = importlib.util.find_spec("liger_kernel") is not None


@pytest.mark.skipif(LIGER, reason="liger-kernel is installed here")
def test_without_liger_kernel_the_backend_says_what_to_install():
    head = torch.nn.Linear(4, 9, bias=False)
    with pytest.raises(ImportError, match='logprob_kernel = "liger" needs liger-kernel>=0.8.5') as refused:
        liger_head_logprobs(head, torch.randn(3, 4), torch.tensor([1, 2, 3]))
    assert 'or set logprob_kernel = "aerorl"' in str(refused.value)


def test_a_head_with_a_bias_is_refused_before_liger_is_imported():
    with pytest.raises(ValueError, match="takes a bias-free LM head"):
        liger_head_logprobs(torch.nn.Linear(4, 9), torch.randn(3, 4), torch.tensor([1, 2, 3]))


@pytest.mark.skipif(not (LIGER and torch.cuda.is_available()), reason="needs liger-kernel and a CUDA device")
def test_liger_gives_our_log_probs_entropies_and_gradients():
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(300, 64, generator=generator).cuda().requires_grad_()  # [N, H]
    head = torch.nn.Linear(64, 1000, bias=False).cuda()  # [V, H]
    targets = torch.randint(0, 1000, (300,), generator=generator).cuda()  # [N]
    weights = torch.linspace(-1.0, 1.0, 300, device="cuda")  # [N]
    theirs = liger_head_logprobs(head, hidden, targets, temperature=0.7)
    (weights * theirs.logprobs + weights.flip(0) * theirs.entropy).sum().backward()
    their_grads = hidden.grad.clone(), head.weight.grad.clone()
    hidden.grad, head.weight.grad = None, None
    ours = fused_token_logprobs(hidden[None], head.weight, targets[None], torch.ones(1, 300, dtype=torch.bool,
                                device="cuda"), temperature=0.7)
    (weights * ours.logprobs + weights.flip(0) * ours.entropy).sum().backward()
    torch.testing.assert_close(theirs.logprobs, ours.logprobs, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(theirs.entropy, ours.entropy, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(their_grads[0], hidden.grad, rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(their_grads[1], head.weight.grad, rtol=1e-3, atol=1e-4)
