import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from aerorl_ops.losses import (
    FusedMaskedCrossEntropyLoss,
    fused_masked_cross_entropy,
    masked_cross_entropy_loss,
)

TOL = {torch.float64: dict(rtol=1e-10, atol=1e-12), torch.float32: dict(rtol=1e-5, atol=1e-6)}


def make_batch(dtype, batch=2, seq=7, hidden=5, vocab=11, bias=False, seed=0):
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(batch, seq, hidden, generator=gen, dtype=dtype, requires_grad=True)  # [B, T, H]
    w = torch.randn(vocab, hidden, generator=gen, dtype=dtype, requires_grad=True)  # [V, H]
    b = torch.randn(vocab, generator=gen, dtype=dtype, requires_grad=True) if bias else None  # [V]
    labels = torch.randint(0, vocab, (batch, seq), generator=gen)  # [B, T]
    labels[0, 1] = labels[1, -1] = -100
    vision = torch.zeros(batch, seq, dtype=torch.bool)  # [B, T]
    vision[:, 2:5] = True
    return h, w, b, labels, vision


def naive_loss_and_grads(h, w, b, labels, vision, ignore_index=-100):
    inputs = [t for t in (h, w, b) if t is not None]
    loss = masked_cross_entropy_loss(F.linear(h, w, b), labels, vision, ignore_index)
    return loss, torch.autograd.grad(loss, inputs)


def fused_loss_and_grads(h, w, b, labels, vision, ignore_index=-100, chunk_size=3):
    inputs = [t for t in (h, w, b) if t is not None]
    loss = fused_masked_cross_entropy(h, w, labels, vision, ignore_index, chunk_size, lm_head_bias=b)
    return loss, torch.autograd.grad(loss, inputs)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("chunk_size", [1, 3, 1000])
def test_fused_matches_naive_loss_and_gradients(dtype, bias, chunk_size):
    h, w, b, labels, vision = make_batch(dtype, bias=bias)
    expected_loss, expected_grads = naive_loss_and_grads(h, w, b, labels, vision)
    loss, grads = fused_loss_and_grads(h, w, b, labels, vision, chunk_size=chunk_size)
    assert loss.dtype == dtype
    torch.testing.assert_close(loss, expected_loss, **TOL[dtype])
    for got, want in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(got, want, **TOL[dtype])


def test_fused_hand_computed_value_and_gradient():
    # H = V = 2, W = I so logits equal hidden states. Position 0 (logits 1, 0; label 0) is the only one counted.
    h = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]], dtype=torch.float64, requires_grad=True)
    w = torch.eye(2, dtype=torch.float64, requires_grad=True)
    loss = fused_masked_cross_entropy(h, w, torch.tensor([[0, 1]]), torch.tensor([[False, True]]))
    loss.backward()
    e = math.e
    p0 = e / (e + 1)  # softmax of the target at position 0
    assert loss.item() == pytest.approx(-math.log(p0), abs=1e-12)
    # dL/dz0 = (p0 - 1, 1 - p0); W = I so dL/dh0 equals it, dL/dW = outer(dL/dz0, h0).
    dz = torch.tensor([p0 - 1, 1 - p0], dtype=torch.float64)
    torch.testing.assert_close(h.grad, torch.stack([dz, torch.zeros(2, dtype=torch.float64)])[None])
    torch.testing.assert_close(w.grad, torch.outer(dz, h.detach()[0, 0]))


def test_vision_positions_do_not_affect_loss_or_gradients_elsewhere():
    h, w, _, labels, vision = make_batch(torch.float64)
    loss, (grad_h, grad_w) = fused_loss_and_grads(h, w, None, labels, vision)

    perturbed = h.detach().clone()
    perturbed[vision] += 100.0 * torch.randn_like(perturbed[vision])
    perturbed.requires_grad_(True)
    loss_p, (grad_h_p, grad_w_p) = fused_loss_and_grads(perturbed, w, None, labels, vision)

    assert loss_p.item() == loss.item()
    torch.testing.assert_close(grad_w_p, grad_w, rtol=0, atol=0)
    torch.testing.assert_close(grad_h_p, grad_h, rtol=0, atol=0)
    assert torch.equal(grad_h[vision], torch.zeros_like(grad_h[vision]))


def test_naive_vision_logits_do_not_affect_loss_or_gradients_elsewhere():
    h, w, _, labels, vision = make_batch(torch.float64)
    logits = F.linear(h, w).detach().requires_grad_(True)
    loss = masked_cross_entropy_loss(logits, labels, vision)
    (grad,) = torch.autograd.grad(loss, logits)

    perturbed = logits.detach().clone()
    perturbed[vision] = 50.0 * torch.randn_like(perturbed[vision])
    perturbed.requires_grad_(True)
    loss_p = masked_cross_entropy_loss(perturbed, labels, vision)
    (grad_p,) = torch.autograd.grad(loss_p, perturbed)

    assert loss_p.item() == loss.item()
    torch.testing.assert_close(grad_p, grad, rtol=0, atol=0)


def test_ignore_index_positions_are_excluded_and_never_read():
    h, w, _, labels, vision = make_batch(torch.float64)
    labels = labels.masked_fill(labels.eq(-100), 99)  # out-of-vocab ignore value
    expected_loss, expected_grads = naive_loss_and_grads(h, w, None, labels, vision, ignore_index=99)
    loss, grads = fused_loss_and_grads(h, w, None, labels, vision, ignore_index=99)
    torch.testing.assert_close(loss, expected_loss, **TOL[torch.float64])
    for got, want in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(got, want, **TOL[torch.float64])


def test_all_masked_gives_zero_loss_and_zero_grads():
    h, w, b, labels, _ = make_batch(torch.float32, bias=True)
    vision = labels.ne(-100)  # every label is either a vision token or ignore_index
    loss, grads = fused_loss_and_grads(h, w, b, labels, vision)
    assert loss.item() == 0.0
    for grad in grads:
        assert torch.equal(grad, torch.zeros_like(grad))


def test_upstream_gradient_scales_and_frozen_head_is_respected():
    h, w, _, labels, vision = make_batch(torch.float64)
    w_frozen = w.detach()
    expected = torch.autograd.grad(2.5 * masked_cross_entropy_loss(F.linear(h, w_frozen), labels, vision), h)[0]
    got = torch.autograd.grad(2.5 * fused_masked_cross_entropy(h, w_frozen, labels, vision, chunk_size=4), h)[0]
    torch.testing.assert_close(got, expected, **TOL[torch.float64])


def test_backward_with_retain_graph_then_second_backward_raises():
    h, w, _, labels, vision = make_batch(torch.float32)
    loss = fused_masked_cross_entropy(h, w, labels, vision)
    loss.backward(retain_graph=True)
    naive = naive_loss_and_grads(h, w, None, labels, vision)[1][1]
    torch.testing.assert_close(w.grad, naive, **TOL[torch.float32])
    with pytest.raises(RuntimeError, match="one backward pass"):
        loss.backward()


def test_no_grad_forward_gives_the_same_value():
    h, w, _, labels, vision = make_batch(torch.float64)
    expected = masked_cross_entropy_loss(F.linear(h, w), labels, vision)
    with torch.no_grad():
        loss = fused_masked_cross_entropy(h, w, labels, vision)
    assert not loss.requires_grad
    torch.testing.assert_close(loss, expected.detach(), **TOL[torch.float64])


def test_module_form_and_out_of_vocab_label_error():
    h, w, _, labels, vision = make_batch(torch.float64)
    loss, stats = FusedMaskedCrossEntropyLoss(chunk_size=2)(h, w, labels, vision)
    torch.testing.assert_close(loss, naive_loss_and_grads(h, w, None, labels, vision)[0], **TOL[torch.float64])
    assert stats.num_tokens.item() == int((~vision & labels.ne(-100)).sum())
    labels[0, 0] = 11  # vocab is 11 and position 0 is counted
    with pytest.raises(ValueError, match=r"\[0, 11\)"):
        fused_masked_cross_entropy(h, w, labels, vision)


@settings(max_examples=30, deadline=None)
@given(
    batch=st.integers(1, 3),
    seq=st.integers(1, 6),
    vocab=st.integers(2, 9),
    chunk_size=st.integers(1, 8),
    seed=st.integers(0, 2**16),
)
def test_fused_matches_naive_on_random_masks(batch, seq, vocab, chunk_size, seed):
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(batch, seq, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.randn(vocab, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    labels = torch.randint(0, vocab, (batch, seq), generator=gen)
    labels[torch.rand(batch, seq, generator=gen) < 0.3] = -100
    vision = torch.rand(batch, seq, generator=gen) < 0.5
    expected_loss, expected_grads = naive_loss_and_grads(h, w, None, labels, vision)
    loss, grads = fused_loss_and_grads(h, w, None, labels, vision, chunk_size=chunk_size)
    torch.testing.assert_close(loss, expected_loss, **TOL[torch.float64])
    for got, want in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(got, want, **TOL[torch.float64])
