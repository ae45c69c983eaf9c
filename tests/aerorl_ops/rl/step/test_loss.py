"""The RL loss of a micro-batch on hand-computed tiny tensors: each term is the functional core's."""

import math

import pytest
import torch

from aerorl_ops.rl.core.functional import kl_penalty
from aerorl_ops.rl.step.loss import LossStats, RLLoss, Targets, token_weighted_mean

LOGPROB = torch.tensor([[-1.0, -2.0]])
MASK = torch.ones(1, 2)
TARGETS = Targets(old_logprob=LOGPROB, advantages=torch.tensor([[1.0, -1.0]]), returns=torch.tensor([[1.0, 0.0]]),
                  mask=MASK, ref_logprob=torch.tensor([[-1.5, -2.0]]), old_values=torch.zeros(1, 2))
ENTROPY = torch.tensor([[0.5, 1.5]])  # token-mean 1.0
VALUES = torch.tensor([[0.2, 0.4]])  # squared errors 0.64, 0.16 (inside the clip): 0.5 x mean = 0.2


def rl_loss(**changes) -> RLLoss:
    settings = dict(agg_mode="token-mean", clip_low=0.2, clip_high=0.2, dual_clip_c=3.0, kl_coef=0.2, kl_kind="k3",
                    entropy_coef=0.1, value_coef=0.5, value_clip=0.5)
    return RLLoss(**{**settings, **changes})


def test_every_term_by_hand():
    # policy: ratio 1, so -A per token = (-1, 1), token-mean 0; k3 KL: d = ref - new = (-0.5, 0),
    # exp(d) - d - 1 = (exp(-0.5) - 0.5, 0), mean / 2; entropy bonus -0.1 x 1.0; value 0.5 x 0.2
    loss, stats = rl_loss()(LOGPROB, ENTROPY, VALUES, TARGETS)
    k3 = (math.exp(-0.5) - 0.5) / 2
    assert float(loss.weighted) == pytest.approx(0.2 * k3 - 0.1 + 0.1, abs=1e-7) == loss.value
    assert stats == LossStats(tokens=2.0, clip_fraction=0.0, approx_kl=0.0, dual_clip_fraction=0.0,
                              value_loss=pytest.approx(0.2), value_clip_fraction=0.0)


def test_switching_the_kl_kind_changes_the_kl_term_as_functional_says():
    losses = {kind: float(rl_loss(kl_kind=kind)(LOGPROB, ENTROPY, VALUES, TARGETS)[0].weighted)
              for kind in ("k1", "k2", "k3")}
    terms = {kind: float(kl_penalty(LOGPROB, TARGETS.ref_logprob, kind).mean()) for kind in losses}
    assert terms["k1"] == pytest.approx(0.25) and terms["k2"] == pytest.approx(0.0625)  # delta = (0.5, 0)
    for kind in ("k1", "k2"):
        assert losses[kind] - losses["k3"] == pytest.approx(0.2 * (terms[kind] - terms["k3"]), abs=1e-7)


def test_without_a_reference_or_a_value_head_those_terms_are_absent():
    loss, stats = rl_loss()(LOGPROB, ENTROPY, None, TARGETS._replace(ref_logprob=None))
    assert float(loss.weighted) == pytest.approx(-0.1, abs=1e-7)  # the entropy bonus alone
    assert stats.value_loss is None and stats.value_clip_fraction is None
    alone, _ = rl_loss(entropy_coef=0.0)(LOGPROB, ENTROPY, None, TARGETS._replace(ref_logprob=None))
    assert float(alone.weighted) == 0.0


def test_the_entropy_bonus_pushes_entropy_up():
    entropy = ENTROPY.clone().requires_grad_(True)
    loss, _ = rl_loss(agg_mode="token-sum")(LOGPROB, entropy, VALUES, TARGETS)
    (grad,) = torch.autograd.grad(loss.weighted, entropy)
    assert torch.equal(grad, torch.full((1, 2), -0.1))


def test_the_dual_clip_and_the_ratio_clip_are_reported():
    # new - old = log 2 at both tokens: ratio 2 > 1.2. A = +1 takes the clipped -1.2 (clip binds);
    # A = -1 gives max(2, 1.2) = 2 < 3 (no dual clip). With c = 1.5 the dual clip binds on that token.
    new = LOGPROB + math.log(2.0)
    _, stats = rl_loss(kl_coef=0.0)(new, ENTROPY, None, TARGETS)
    assert (stats.clip_fraction, stats.dual_clip_fraction) == (0.5, 0.0)
    assert stats.approx_kl == pytest.approx(-math.log(2.0))
    _, stats = rl_loss(kl_coef=0.0, dual_clip_c=1.5)(new, ENTROPY, None, TARGETS)
    assert stats.dual_clip_fraction == 0.5


def test_token_weighted_means_over_passes():
    passes = [LossStats(1.0, 1.0, 0.1, 0.0, None, None), LossStats(3.0, 0.0, 0.3, 0.0, None, None)]
    assert token_weighted_mean(passes, "clip_fraction") == 0.25
    assert token_weighted_mean(passes, "approx_kl") == pytest.approx(0.25)
    assert token_weighted_mean(passes, "value_clip_fraction") is None


@pytest.mark.parametrize("policy_loss", ["ppo", "gspo", "gmpo", "sapo", "cispo"])
@pytest.mark.parametrize("agg_mode", ["token-mean", "seq-mean-token-sum-norm"])
def test_micro_batches_weighted_by_their_shares_give_the_whole_batchs_gradient(policy_loss, agg_mode):
    """SAPO's policy term is seq-mean-token-mean and GMPO's a mean over rows whatever ``agg_mode``; the
    KL and entropy terms take ``agg_mode``: each weighs by its own share, so two micro-batches' summed
    gradients are the one-batch gradient (float64, rows of 1 to 4 counted tokens and an interior gap)."""
    from aerorl_ops.rl.step.loss import LossShares

    generator = torch.Generator().manual_seed(0)
    old = -torch.rand(4, 5, generator=generator, dtype=torch.float64) - 0.5
    new = (old + 0.3 * torch.randn(4, 5, generator=generator, dtype=torch.float64)).requires_grad_(True)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [1, 1, 0, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.float64)
    advantages = torch.tensor([1.0, -0.5, 0.25, -1.0], dtype=torch.float64)[:, None].expand(4, 5)
    targets = Targets(old, advantages, advantages, mask, old - 0.1, None)
    entropy = torch.rand(4, 5, generator=generator, dtype=torch.float64)
    loss = rl_loss(policy_loss=policy_loss, agg_mode=agg_mode, clip_low=0.2, clip_high=0.28)
    whole, _ = loss(new, entropy, None, targets)
    (expected,) = torch.autograd.grad(whole.weighted, new)
    total, parts = torch.zeros_like(new), (slice(0, 1), slice(1, 4))
    for rows in parts:
        shares = loss.shares(mask[rows], mask)
        part, _ = loss(new[rows], entropy[rows], None, targets.rows(rows), shares)
        total = total + torch.autograd.grad(part.weighted, new)[0]
    assert torch.allclose(total, expected, rtol=0, atol=1e-12)
    assert float(expected.abs().sum()) > 0
    assert loss.shares(mask[:1], mask) == LossShares(
        {"gmpo": 1 / 4, "sapo": 1 / 4}.get(policy_loss, 3 / 11 if agg_mode == "token-mean" else 1 / 4),
        3 / 11 if agg_mode == "token-mean" else 1 / 4)
