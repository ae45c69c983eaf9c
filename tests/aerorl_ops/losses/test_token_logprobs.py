import math

import pytest
import torch
import torch.nn.functional as F

from aerorl_ops.losses import TokenLogprobs, fused_token_logprobs

TOL = {torch.float64: dict(rtol=1e-10, atol=1e-12), torch.float32: dict(rtol=1e-5, atol=1e-6)}


def make_batch(dtype, bias=False, batch=2, seq=6, hidden=4, vocab=9, seed=1):
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(batch, seq, hidden, generator=gen, dtype=dtype, requires_grad=True)  # [B, T, H]
    w = torch.randn(vocab, hidden, generator=gen, dtype=dtype, requires_grad=True)  # [V, H]
    b = torch.randn(vocab, generator=gen, dtype=dtype, requires_grad=True) if bias else None  # [V]
    targets = torch.randint(0, vocab, (batch, seq), generator=gen)  # [B, T]
    mask = torch.tensor([[False, True, True, False, True, True], [True, False, False, True, True, False]])
    targets[~mask] = -100  # never read
    return h, w, b, targets, mask


def naive(h, w, b, targets, mask, temperature=1.0):
    logp = F.log_softmax(F.linear(h, w, b) / temperature, dim=-1)  # [B, T, V]
    picked = logp.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)  # [B, T]
    entropy = -(logp.exp() * logp).sum(-1)  # [B, T]
    return picked[mask], entropy[mask]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize(("chunk_size", "temperature"), [(1, 1.0), (2, 0.7), (100, 1.3)])
def test_logprobs_entropy_and_gradients_match_naive(dtype, bias, chunk_size, temperature):
    h, w, b, targets, mask = make_batch(dtype, bias)
    inputs = [t for t in (h, w, b) if t is not None]
    want_logp, want_entropy = naive(h, w, b, targets, mask, temperature)
    out = fused_token_logprobs(h, w, targets, mask, chunk_size, temperature, lm_head_bias=b)
    assert isinstance(out, TokenLogprobs)
    assert out.logprobs.shape == (int(mask.sum()),)
    torch.testing.assert_close(out.logprobs, want_logp, **TOL[dtype])
    torch.testing.assert_close(out.entropy, want_entropy.detach(), **TOL[dtype])

    # A per-token upstream gradient, as a policy-gradient loss would send; then one with an entropy
    # bonus too, and the entropy alone.
    weights = torch.linspace(-1.0, 2.0, out.logprobs.numel(), dtype=dtype)
    bonus = torch.linspace(0.5, -1.5, out.logprobs.numel(), dtype=dtype)
    for loss_of in (lambda logp, ent: (weights * logp).sum(), lambda logp, ent: (weights * logp + bonus * ent).sum(),
                    lambda logp, ent: (bonus * ent).sum()):
        want_grads = torch.autograd.grad(loss_of(want_logp, want_entropy), inputs, retain_graph=True)
        grads = torch.autograd.grad(loss_of(out.logprobs, out.entropy), inputs, retain_graph=True)
        for got, want in zip(grads, want_grads, strict=True):
            torch.testing.assert_close(got, want, **TOL[dtype])


def test_hand_computed_logprob_and_entropy():
    # W = I, so logits = hidden = (log 1, log 2, log 1): p = (1/4, 1/2, 1/4).
    h = torch.log(torch.tensor([[[1.0, 2.0, 1.0]]], dtype=torch.float64))
    out = fused_token_logprobs(h, torch.eye(3, dtype=torch.float64), torch.tensor([[1]]), torch.tensor([[True]]))
    assert out.logprobs.item() == pytest.approx(math.log(0.5), abs=1e-12)
    assert out.entropy.item() == pytest.approx(1.5 * math.log(2.0), abs=1e-12)


def test_masked_out_positions_do_not_affect_results():
    h, w, _, targets, mask = make_batch(torch.float64)
    out = fused_token_logprobs(h, w, targets, mask, chunk_size=2)
    (grad_w,) = torch.autograd.grad(out.logprobs.sum(), w)
    perturbed = h.detach().clone()
    perturbed[~mask] = 1e3
    out_p = fused_token_logprobs(perturbed, w, targets, mask, chunk_size=2)
    (grad_w_p,) = torch.autograd.grad(out_p.logprobs.sum(), w)
    assert torch.equal(out_p.logprobs, out.logprobs)
    assert torch.equal(grad_w_p, grad_w)


def test_empty_mask_gives_empty_outputs_and_zero_grads():
    h, w, _, targets, mask = make_batch(torch.float32)
    out = fused_token_logprobs(h, w, targets, torch.zeros_like(mask))
    assert out.logprobs.shape == (0,)
    grad_h, grad_w = torch.autograd.grad(out.logprobs.sum(), (h, w), allow_unused=True)
    for grad in (grad_h, grad_w):
        assert grad is None or torch.equal(grad, torch.zeros_like(grad))


def test_bad_inputs_are_reported():
    h, w, _, targets, mask = make_batch(torch.float64)
    with pytest.raises(ValueError, match="temperature"):
        fused_token_logprobs(h, w, targets, mask, temperature=0.0)
    with pytest.raises(ValueError, match="target_ids"):
        fused_token_logprobs(h, w, targets[:, :-1], mask)
    with pytest.raises(ValueError, match=r"\[0, 9\)"):
        fused_token_logprobs(h, w, targets, mask | ~mask)  # -100 targets become counted
