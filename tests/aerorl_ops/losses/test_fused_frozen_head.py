"""The fused LM-head paths with a frozen head (LoRA: the LM head is never adapted).

Only dL/dhidden is computed and kept: the weight gets no ``.grad``, and nothing with V columns
bigger than one [chunk_size, V] block is saved (or held) for backward. Sizes are chosen so that
V = 11 differs from every other dimension (B = 2, T = 7, H = 5, chunk = 3, N = 6 counted rows).
"""

import math

import pytest
import torch
import torch.nn.functional as F

from aerorl_ops.losses import fused_masked_cross_entropy, fused_token_logprobs, masked_cross_entropy_loss

VOCAB, CHUNK = 11, 3


def frozen_batch(seed=0):
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(2, 7, 5, generator=gen, dtype=torch.float64, requires_grad=True)  # [B, T, H]
    head = torch.nn.Linear(5, VOCAB, bias=False, dtype=torch.float64).requires_grad_(False)  # frozen W [V, H]
    with torch.no_grad():
        head.weight.copy_(torch.randn(VOCAB, 5, generator=gen, dtype=torch.float64))
    labels = torch.randint(0, VOCAB, (2, 7), generator=gen)  # [B, T]
    labels[0, 1] = labels[1, -1] = -100
    vision = torch.zeros(2, 7, dtype=torch.bool)  # [B, T]
    vision[:, 2:5] = True
    return hidden, head.weight, labels, vision


class KeptForBackward:
    """Shapes of the tensors a graph keeps for backward: what ``saved_tensors_hooks`` sees, plus any
    tensor a custom Function holds on its ctx (the fused loss's precomputed gradients)."""

    def __init__(self, weight: torch.Tensor) -> None:
        self.weight_ptr = weight.untyped_storage().data_ptr()
        self.shapes: list[tuple[int, ...]] = []

    def pack(self, tensor: torch.Tensor) -> torch.Tensor:
        if tensor.untyped_storage().data_ptr() != self.weight_ptr:  # the parameter itself is no new memory
            self.shapes.append(tuple(tensor.shape))
        return tensor

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, lambda tensor: tensor)

    def add_ctx_tensors(self, grad_fn) -> None:
        for held in getattr(grad_fn, "grads", ()):
            if held is not None:
                self.shapes.append(tuple(held.shape))

    def over_one_block(self) -> list[tuple[int, ...]]:
        """Kept tensors with a dimension of size V and more elements than one [CHUNK, V] block."""
        return [s for s in self.shapes if VOCAB in s and math.prod(s) > CHUNK * VOCAB]


def test_frozen_head_loss_and_hidden_gradient_equal_the_naive_path():
    hidden, weight, labels, vision = frozen_batch()
    naive = masked_cross_entropy_loss(F.linear(hidden, weight), labels, vision)
    (naive_grad,) = torch.autograd.grad(naive, hidden)
    fused = fused_masked_cross_entropy(hidden, weight, labels, vision, chunk_size=CHUNK)
    fused.backward()
    assert abs(fused.item() - naive.item()) < 1e-6
    torch.testing.assert_close(hidden.grad, naive_grad, rtol=0, atol=1e-6)
    assert weight.grad is None and not weight.requires_grad


def test_frozen_head_hand_computed():
    # H = V = 2 and W = I (frozen), so logits equal the hidden states; only position 0 (logits 1, 0; label 0) counts.
    hidden = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]], dtype=torch.float64, requires_grad=True)
    weight = torch.eye(2, dtype=torch.float64)
    loss = fused_masked_cross_entropy(hidden, weight, torch.tensor([[0, 1]]), torch.tensor([[False, True]]))
    loss.backward()
    p0 = math.e / (math.e + 1)
    assert loss.item() == pytest.approx(-math.log(p0), abs=1e-12)
    expected = torch.tensor([[[p0 - 1, 1 - p0], [0.0, 0.0]]], dtype=torch.float64)  # dL/dh = dL/dz @ I
    torch.testing.assert_close(hidden.grad, expected, rtol=0, atol=1e-12)
    assert weight.grad is None


def test_frozen_head_keeps_no_weight_gradient_and_no_logits_beyond_one_chunk():
    hidden, weight, labels, vision = frozen_batch()
    kept = KeptForBackward(weight)
    with kept.hooks():
        loss = fused_masked_cross_entropy(hidden, weight, labels, vision, chunk_size=CHUNK)
    kept.add_ctx_tensors(loss.grad_fn)
    grad_hidden, grad_weight, grad_bias = loss.grad_fn.grads  # precomputed in forward
    n_rows = int((~vision & labels.ne(-100)).sum())
    assert n_rows == 6 and CHUNK < n_rows
    assert grad_weight is None and grad_bias is None  # no [V, H] buffer was allocated
    assert tuple(grad_hidden.shape) == (n_rows, 5)
    assert kept.over_one_block() == []


def test_the_naive_path_does_keep_full_logits():
    # The check above can see [*, V] tensors: the naive path keeps its [B*T, V] log-softmax.
    hidden, weight, labels, vision = frozen_batch()
    kept = KeptForBackward(weight)
    with kept.hooks():
        masked_cross_entropy_loss(F.linear(hidden, weight), labels, vision)
    assert (14, VOCAB) in kept.over_one_block()


def test_a_trainable_head_would_be_caught_holding_a_weight_gradient():
    hidden, weight, labels, vision = frozen_batch()
    weight.requires_grad_(True)
    kept = KeptForBackward(weight)
    loss = fused_masked_cross_entropy(hidden, weight, labels, vision, chunk_size=CHUNK)
    kept.add_ctx_tensors(loss.grad_fn)
    assert kept.over_one_block() == [(VOCAB, 5)]


def test_frozen_head_token_logprobs_match_the_naive_path_and_keep_no_weight_gradient():
    hidden, weight, labels, vision = frozen_batch()
    mask = ~vision & labels.ne(-100)  # [B, T]
    advantages = torch.linspace(-1.0, 2.0, int(mask.sum()), dtype=torch.float64)  # [N] per-token upstream weights

    log_p = torch.log_softmax(F.linear(hidden, weight), dim=-1)  # [B, T, V]
    naive = log_p[mask].gather(1, labels[mask, None]).squeeze(1)  # [N]
    naive_entropy = -(log_p.exp() * log_p).sum(-1)[mask]  # [N]
    (naive_grad,) = torch.autograd.grad((advantages * naive).sum() + naive_entropy.sum(), hidden)

    kept = KeptForBackward(weight)
    with kept.hooks():
        out = fused_token_logprobs(hidden, weight, labels.clamp(min=0), mask, chunk_size=CHUNK)
    ((advantages * out.logprobs).sum() + out.entropy.sum()).backward()
    torch.testing.assert_close(out.logprobs, naive.detach(), rtol=0, atol=1e-6)
    torch.testing.assert_close(out.entropy, naive_entropy.detach(), rtol=0, atol=1e-6)
    torch.testing.assert_close(hidden.grad, naive_grad, rtol=0, atol=1e-6)
    assert weight.grad is None
    assert kept.shapes and kept.over_one_block() == []
