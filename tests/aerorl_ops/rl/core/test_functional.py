"""The RL functional core on hand-computed tensors, and against verl's formulas re-written here."""

import math
import statistics

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from aerorl_ops.rl.core.advantages import (
    gae_advantages,
    grpo_advantages,
    masked_whiten,
    reinforce_pp_advantages,
    rloo_advantages,
)
from aerorl_ops.rl.core.functional import (
    AGGREGATORS,
    aggregate_loss,
    aggregation_share,
    explained_variance,
    kl_penalty,
    policy_loss,
    value_loss,
)

TOL = {"atol": 1e-6, "rtol": 1e-6}
F64 = torch.float64


def t(rows):
    return torch.tensor(rows, dtype=F64)


def close(actual, expected):
    torch.testing.assert_close(actual, torch.as_tensor(expected, dtype=actual.dtype), **TOL)


def whiten_by_hand(rows, mask_rows):
    """Whitening with the stdlib: (x - mean) / sqrt(unbiased variance + 1e-8), applied to every position."""
    counted = [x for row, m_row in zip(rows, mask_rows, strict=True) for x, m in zip(row, m_row, strict=True) if m]
    mean, var = statistics.fmean(counted), statistics.variance(counted)
    return [[(x - mean) / math.sqrt(var + 1e-8) for x in row] for row in rows]


# --- GRPO / Dr.GRPO -------------------------------------------------------------------------------

REWARDS = t([[0.5, 0.0, 0.5], [0.0, 0.0, 0.0], [0.0, 2.0, 0.0]])  # scores 1, 0, 2 (sum of token rewards)
MASK = t([[1, 1, 1], [1, 1, 0], [1, 0, 0]])


def test_grpo_normalises_by_the_unbiased_group_std():
    adv, returns = grpo_advantages(REWARDS[:2], MASK[:2], ["p", "p"])
    # scores (1, 0): mean .5, unbiased std sqrt((.25 + .25) / 1) = sqrt(.5)
    a = 0.5 / (math.sqrt(0.5) + 1e-6)
    close(adv, [[a, a, a], [-a, -a, 0.0]])
    close(returns, adv)


def test_dr_grpo_subtracts_the_group_mean_only():
    adv, returns = grpo_advantages(REWARDS[:2], MASK[:2], ["p", "p"], scale_by_std=False)
    close(adv, [[0.5, 0.5, 0.5], [-0.5, -0.5, 0.0]])
    close(returns, adv)


def test_grpo_group_of_one_has_mean_zero_and_std_one():
    adv, _ = grpo_advantages(REWARDS[2:], MASK[2:], [7])
    close(adv, [[2.0 / (1.0 + 1e-6), 0.0, 0.0]])
    adv, _ = grpo_advantages(REWARDS[2:], MASK[2:], [7], scale_by_std=False)
    close(adv, [[2.0, 0.0, 0.0]])


def test_grpo_groups_by_string_ids_in_any_order():
    rewards = t([[1.0, 0.0], [5.0, 0.0], [0.0, 0.0], [3.0, 0.0]])  # scores 1, 5, 0, 3
    mask = torch.ones(4, 2, dtype=F64)
    adv, _ = grpo_advantages(rewards, mask, ["a", "b", "a", "b"], eps=0.0)
    # group a: (1, 0), mean .5, std sqrt(.5); group b: (5, 3), mean 4, std sqrt(2)
    a, b = 0.5 / math.sqrt(0.5), 1.0 / math.sqrt(2.0)
    close(adv[:, 0], [a, b, -a, -b])
    # same groups named by a tensor give the same advantages
    close(grpo_advantages(rewards, mask, torch.tensor([0, 1, 0, 1]), eps=0.0).advantages, adv)


def test_grpo_equal_scores_give_zero_advantage():
    adv, _ = grpo_advantages(t([[1.0], [1.0], [1.0]]), torch.ones(3, 1, dtype=F64), ["q"] * 3)
    close(adv, [[0.0], [0.0], [0.0]])


def test_grpo_rejects_bad_group_ids_and_shapes():
    with pytest.raises(ValueError, match="group_ids has 2 ids but token_rewards has 3 rows"):
        grpo_advantages(REWARDS, MASK, ["a", "b"])
    with pytest.raises(ValueError, match="group_ids must be hashable"):
        grpo_advantages(REWARDS, MASK, [["a"], ["a"], ["b"]])
    with pytest.raises(ValueError, match="response_mask has shape"):
        grpo_advantages(REWARDS, MASK[:2], ["a", "a", "b"])


# --- RLOO -----------------------------------------------------------------------------------------


def test_rloo_uses_the_leave_one_out_baseline():
    rewards = t([[3.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 4.0]])  # scores 3, 0, 0 (group x) and 4 (alone)
    mask = t([[1, 1], [1, 0], [1, 1], [1, 1]])
    adv, returns = rloo_advantages(rewards, mask, ["x", "x", "x", "y"])
    # n = 3, mean 1: 3 * 3/2 - 1 * 3/2 = 3 (= 3 - mean(0, 0)); 0 * 3/2 - 3/2 = -1.5 (= 0 - mean(3, 0))
    close(adv, [[3.0, 3.0], [-1.5, 0.0], [-1.5, -1.5], [4.0, 4.0]])  # a group of one keeps its score
    close(returns, adv)


# --- REINFORCE++ ----------------------------------------------------------------------------------


def test_reinforce_pp_carries_the_return_through_a_masked_position():
    rewards = t([[0.0, 5.0, 0.0, 1.0], [0.0, 0.0, 2.0, 7.0]])
    mask = t([[1, 0, 1, 1], [1, 1, 1, 0]])
    adv, returns = reinforce_pp_advantages(rewards, mask, gamma=0.5)
    # row 0: G3 = 1, G2 = 0 + .5 * 1, position 1 masked: return 0, its reward 5 ignored, G carried; G0 = .5 * .5
    # row 1: position 3 masked (its reward 7 ignored): G2 = 2, G1 = 1, G0 = .5
    expected_returns = [[0.25, 0.0, 0.5, 1.0], [0.5, 1.0, 2.0, 0.0]]
    close(returns, expected_returns)
    whitened = whiten_by_hand(expected_returns, mask.tolist())
    close(adv, [[w * m for w, m in zip(w_row, m_row, strict=True)]
                for w_row, m_row in zip(whitened, mask.tolist(), strict=True)])


# --- GAE ------------------------------------------------------------------------------------------


def gae_by_hand(rewards, values, mask, gamma, lam):
    """GAE per row with plain floats, skipping masked positions."""
    raw = []
    for r, v, m in zip(rewards, values, mask, strict=True):
        row, next_value, next_adv = [0.0] * len(r), 0.0, 0.0
        for i in reversed(range(len(r))):
            if m[i]:
                next_adv = r[i] + gamma * next_value - v[i] + gamma * lam * next_adv
                next_value = v[i]
            row[i] = next_adv
        raw.append(row)
    returns = [[a + v for a, v in zip(a_row, v_row, strict=True)] for a_row, v_row in zip(raw, values, strict=True)]
    return whiten_by_hand(raw, mask), returns


def test_gae_matches_a_hand_rolled_loop_with_masked_positions():
    rewards = [[0.0, 9.0, 0.0, 1.0], [0.5, 0.0, 1.0, 3.0], [0.0, 0.0, -1.0, 0.0]]
    values = [[0.2, 0.7, 0.4, 0.5], [0.1, 0.3, 0.2, 0.9], [0.0, 0.6, 0.3, 0.8]]
    mask = [[1, 0, 1, 1], [1, 1, 1, 0], [1, 1, 1, 1]]
    adv, returns = gae_advantages(t(rewards), t(values), t(mask), gamma=0.9, lam=0.8)
    expected_adv, expected_returns = gae_by_hand(rewards, values, mask, 0.9, 0.8)
    close(adv, expected_adv)
    close(returns, expected_returns)


def test_gae_two_steps_by_hand():
    rewards, values, mask = t([[0.0, 1.0], [0.0, 0.0]]), t([[0.2, 0.5], [0.0, 0.0]]), t([[1, 1], [0, 0]])
    adv, returns = gae_advantages(rewards, values, mask, gamma=0.9, lam=0.8)
    # A1 = 1 + 0 - .5 = .5; A0 = (0 + .9 * .5 - .2) + .9 * .8 * .5 = .61; row 1 masked: raw 0
    close(returns, [[0.61 + 0.2, 0.5 + 0.5], [0.0, 0.0]])
    # whitened over the counted .61 and .5: mean .555, unbiased variance 2 * .055^2 / 1 = .00605
    scale = 1 / math.sqrt(0.00605 + 1e-8)
    close(adv, [[0.055 * scale, -0.055 * scale], [-0.555 * scale, -0.555 * scale]])


def test_advantages_reject_bad_discounts():
    with pytest.raises(ValueError, match="gamma"):
        reinforce_pp_advantages(REWARDS, MASK, gamma=1.5)
    with pytest.raises(ValueError, match="lam"):
        gae_advantages(REWARDS, REWARDS, MASK, gamma=0.9, lam=-0.1)
    with pytest.raises(ValueError, match="values has shape"):
        gae_advantages(REWARDS, REWARDS[:, :2], MASK, gamma=0.9, lam=0.9)


# --- masked_whiten --------------------------------------------------------------------------------


def test_masked_whiten_uses_counted_positions_and_unbiased_variance():
    values, mask = t([[1.0, 2.0, 100.0], [3.0, -50.0, 4.0]]), t([[1, 1, 0], [1, 0, 1]])
    # counted 1, 2, 3, 4: mean 2.5, unbiased variance 5/3; every position is transformed
    scale = 1 / math.sqrt(5 / 3 + 1e-8)
    close(masked_whiten(values, mask), (values - 2.5) * scale)
    close(masked_whiten(values, mask.bool(), shift_mean=False), (values - 2.5) * scale + 2.5)
    with pytest.raises(ValueError, match="at least 2"):
        masked_whiten(values, t([[1, 0, 0], [0, 0, 0]]))


# --- KL -------------------------------------------------------------------------------------------

LOGPROB = t([[-1.0, -2.0, -0.5], [-3.0, 0.0, -0.25]])
REF = t([[-1.5, -1.0, -0.5], [-1.0, -30.0, -2.25]])  # delta = logprob - ref: .5, -1, 0 / -2, 30, 2


def kl_by_hand(kind, delta):
    if kind == "k1":
        return delta
    if kind == "abs":
        return abs(delta)
    if kind == "k2":
        return 0.5 * delta**2
    d = max(-20.0, min(20.0, -delta))
    return max(-10.0, min(10.0, math.exp(d) - d - 1))


@pytest.mark.parametrize(("kind", "alias"), [("k1", "kl"), ("abs", "abs"), ("k2", "mse"), ("k3", "low_var_kl")])
def test_kl_kinds_and_their_aliases(kind, alias):
    delta = (LOGPROB - REF).tolist()
    expected = [[kl_by_hand(kind, d) for d in row] for row in delta]
    close(kl_penalty(LOGPROB, REF, kind), expected)
    close(kl_penalty(LOGPROB, REF, alias), expected)


def test_k3_clamps_by_hand():
    # d = ref - logprob: 2 -> e^2 - 3 (inside); 3 -> e^3 - 4 = 16.1 -> 10; 30 -> 20 first, then 10; -30 -> 19 -> 10
    kl = kl_penalty(t([[0.0, 0.0, 0.0, 0.0]]), t([[2.0, 3.0, 30.0, -30.0]]), "k3")
    close(kl, [[math.exp(2) - 3, 10.0, 10.0, 10.0]])


@pytest.mark.parametrize("kind", ["k1", "kl", "abs", "k2", "mse", "k3", "low_var_kl"])
def test_plus_kinds_keep_the_value_and_take_the_k2_gradient(kind):
    small = LOGPROB.clone()
    small[1, 1] = -29.5  # keep delta inside k3's clamps so its own gradient is non-zero and differs from k2's
    logprob = small.clone().requires_grad_(True)
    value = kl_penalty(logprob, REF, kind + "+")
    close(value.detach(), kl_penalty(small, REF, kind))
    value.sum().backward()
    k2_logprob = small.clone().requires_grad_(True)
    kl_penalty(k2_logprob, REF, "k2").sum().backward()
    close(logprob.grad, k2_logprob.grad)
    close(logprob.grad, small - REF)  # d/dlogprob 0.5 * delta^2 = delta


def test_unknown_kl_kind_is_a_value_error():
    for kind in ["k4", "full", "+", "k3++"]:
        with pytest.raises(ValueError, match="kind"):
            kl_penalty(LOGPROB, REF, kind)
    with pytest.raises(ValueError, match="ref_logprob has shape"):
        kl_penalty(LOGPROB, REF[:1], "k1")


# --- aggregation ----------------------------------------------------------------------------------

LOSS = t([[1.0, 2.0, 3.0], [float("nan"), 5.0, 6.0], [7.0, 8.0, 9.0]])
AGG_MASK = t([[1, 1, 0], [0, 0, 0], [1, 1, 1]])  # row 1 fully masked (and holds a NaN that must not leak)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", 27 / 5),  # (1 + 2 + 7 + 8 + 9) / 5 counted tokens
        ("token-sum", 27.0),
        ("seq-mean-token-sum", (3 + 24) / 2),  # two non-empty rows
        ("seq-mean-token-mean", (1.5 + 8) / 2),
        ("seq-mean-token-sum-norm", (3 + 24) / 2 / 3),  # T = 3
    ],
)
def test_aggregation_modes(mode, expected):
    loss_mat = LOSS.clone().requires_grad_(True)
    result = aggregate_loss(loss_mat, AGG_MASK, mode)
    close(result, expected)
    result.backward()
    assert torch.isfinite(loss_mat.grad).all()
    assert (loss_mat.grad[AGG_MASK == 0] == 0).all()


def test_aggregation_over_nothing_is_zero():
    for mode in ["token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]:
        close(aggregate_loss(LOSS, torch.zeros_like(LOSS), mode), 0.0)


def test_unknown_aggregation_mode_is_a_value_error():
    with pytest.raises(ValueError, match="mode 'seq-mean'"):
        aggregate_loss(LOSS, AGG_MASK, "seq-mean")
    with pytest.raises(ValueError, match="loss_mask has shape"):
        aggregate_loss(LOSS, AGG_MASK[:, :2], "token-mean")


# --- policy loss ----------------------------------------------------------------------------------

# old = 0, so logprob = log(ratio); clip range [0.8, 1.3], dual clip 3.
RATIOS = t([[1.5, 0.5, 0.5], [5.0, 1.0, 1000.0]])
ADV = t([[1.0, 1.0, -1.0], [-1.0, -2.0, 1.0]])
PG_MASK = t([[1, 1, 1], [1, 1, 0]])
# per-token loss: A>0 r=1.5: max(-1.5, -1.3) = -1.3 (clipped); A>0 r=.5: max(-.5, -.8) = -.5;
# A<0 r=.5: max(.5, .8) = .8 (clipped), under 3; A<0 r=5: max(5, 1.3) = 5 -> dual clip 3; A=-2 r=1: 2; last masked
PG_TOKENS = [[-1.3, -0.5, 0.8], [3.0, 2.0, 0.0]]


def run_policy_loss(**kwargs):
    logprob = RATIOS.log().requires_grad_(True)
    out = policy_loss(torch.zeros_like(RATIOS), logprob, ADV, PG_MASK, clip_low=0.2, clip_high=0.3, **kwargs)
    return logprob, out


def test_policy_loss_clip_and_dual_clip_by_hand():
    logprob, (loss, clipfrac, approx_kl, dual_clipfrac) = run_policy_loss()
    close(loss, sum(PG_TOKENS[0]) / 5 + sum(PG_TOKENS[1]) / 5)
    close(clipfrac, 2 / 5)
    close(dual_clipfrac, 1 / 5)
    close(approx_kl, -(math.log(1.5) + 2 * math.log(0.5) + math.log(5.0)) / 5)
    assert not (clipfrac.requires_grad or approx_kl.requires_grad or dual_clipfrac.requires_grad)
    loss.backward()
    # clipped and dual-clipped tokens get no gradient; the others d(-A r)/dlog r = -A r, over 5 tokens
    close(logprob.grad, [[0.0, -0.5 / 5, 0.0], [0.0, 2.0 / 5, 0.0]])


def test_policy_loss_with_sequence_mean_aggregation():
    _, out = run_policy_loss(agg_mode="seq-mean-token-mean")
    close(out.loss, (sum(PG_TOKENS[0]) / 3 + sum(PG_TOKENS[1]) / 2) / 2)


def test_policy_loss_clamps_the_log_ratio():
    old, new = t([[0.0]]), t([[30.0]])  # log ratio 30 -> 20
    loss, clipfrac, approx_kl, _ = policy_loss(old, new, t([[1.0]]), t([[1.0]]), 0.2, 0.2)
    close(loss, -1.2)  # max(-e^20, -1.2)
    close(clipfrac, 1.0)
    close(approx_kl, -20.0)


def test_policy_loss_rejects_bad_settings():
    args = (torch.zeros_like(RATIOS), RATIOS.log(), ADV, PG_MASK)
    for name, value in [("clip_low", 0.0), ("clip_low", 1.0), ("clip_high", -0.1), ("clip_high", 1.2)]:
        with pytest.raises(ValueError, match=name):
            policy_loss(*args, **{name: value})
    with pytest.raises(ValueError, match="dual_clip_c"):
        policy_loss(*args, dual_clip_c=1.0)
    with pytest.raises(ValueError, match="agg_mode 'mean'"):
        policy_loss(*args, agg_mode="mean")
    with pytest.raises(ValueError, match="advantages has shape"):
        policy_loss(args[0], args[1], ADV[:1], PG_MASK)


# --- value loss -----------------------------------------------------------------------------------


def test_value_loss_clipping_by_hand():
    values_pred = t([[1.0, 1.0], [0.2, 100.0]]).requires_grad_(True)
    returns, old_values, mask = t([[2.0, 0.0], [1.0, 0.0]]), torch.zeros(2, 2, dtype=F64), t([[1, 1], [1, 0]])
    # v 1 -> clip .5: (1-2)^2 = 1 vs (.5-2)^2 = 2.25 -> 2.25 (clipped); v 1, R 0: 1 vs .25 -> 1; v .2 unclipped: .64
    loss, clipfrac = value_loss(values_pred, returns, old_values, mask, clip=0.5)
    close(loss, 0.5 * (2.25 + 1.0 + 0.64) / 3)
    close(clipfrac, 1 / 3)
    loss.backward()
    # the clipped token's loss does not depend on v; the others: 0.5 * 2 (v - R) / 3
    close(values_pred.grad, [[0.0, 1.0 / 3], [-0.8 / 3, 0.0]])
    with pytest.raises(ValueError, match="clip must be positive"):
        value_loss(values_pred, returns, old_values, mask, clip=0.0)
    with pytest.raises(ValueError, match="old_values has shape"):
        value_loss(values_pred, returns, old_values[:1], mask)


# --- differential: verl's formulas, re-written from their definitions ------------------------------


def verl_whiten(values, mask):
    n = mask.sum()
    mean = (values * mask).sum() / n
    var = (((values - mean) ** 2) * mask).sum() / n * n / (n - 1)
    return (values - mean) * torch.rsqrt(var + 1e-8)


def verl_grpo(rewards, mask, index, eps, scale):
    scores = rewards.sum(-1).clone()
    groups = {}
    for i, g in enumerate(index):
        groups.setdefault(g, []).append(i)
    out = scores.clone()
    for members in groups.values():
        group = scores[members]
        mean, std = (group.mean(), group.std()) if len(members) > 1 else (torch.tensor(0.0), torch.tensor(1.0))
        for i in members:
            out[i] = (scores[i] - mean) / (std + eps) if scale else scores[i] - mean
    return out[:, None] * mask


def verl_rloo(rewards, mask, index):
    scores = rewards.sum(-1)
    out = scores.clone()
    for i, g in enumerate(index):
        members = [j for j, h in enumerate(index) if h == g]
        n = len(members)
        if n > 1:
            out[i] = scores[i] * n / (n - 1) - scores[members].mean() * n / (n - 1)
    return out[:, None] * mask


def verl_reinforce_pp(rewards, mask, gamma):
    returns, running = torch.zeros_like(rewards), 0.0
    for i in reversed(range(rewards.shape[1])):
        running = rewards[:, i] + gamma * running
        returns[:, i] = running
        running = running * mask[:, i]
    return verl_whiten(returns, mask) * mask, returns


def verl_gae(rewards, values, mask, gamma, lam):
    next_values, last, reversed_adv = 0.0, 0.0, []
    for i in reversed(range(rewards.shape[1])):
        delta = rewards[:, i] + gamma * next_values - values[:, i]
        candidate = delta + gamma * lam * last
        next_values = values[:, i] * mask[:, i] + (1 - mask[:, i]) * next_values
        last = candidate * mask[:, i] + (1 - mask[:, i]) * last
        reversed_adv.append(last)
    adv = torch.stack(reversed_adv[::-1], dim=1)
    return verl_whiten(adv, mask), adv + values


def verl_policy_loss(old, new, adv, mask, low, high, c):
    log_ratio = torch.clamp(new - old, -20.0, 20.0)
    ratio = torch.exp(log_ratio)
    l1, l2 = -adv * ratio, -adv * torch.clamp(ratio, 1 - low, 1 + high)
    clip1 = torch.maximum(l1, l2)
    l3 = -adv * c
    losses = torch.where(adv < 0, torch.min(l3, clip1), clip1)
    n = mask.sum()
    return (
        (losses * mask).sum() / n,
        (torch.gt(l2, l1).to(mask.dtype) * mask).sum() / n,
        (-log_ratio * mask).sum() / n,
        ((torch.gt(clip1, l3) * (adv < 0)).to(mask.dtype) * mask).sum() / n,
    )


def verl_value_loss(pred, returns, old, mask, clip):
    clipped = torch.max(torch.min(pred, old + clip), old - clip)
    l1, l2 = (pred - returns) ** 2, (clipped - returns) ** 2
    n = mask.sum()
    return 0.5 * (torch.max(l1, l2) * mask).sum() / n, (torch.gt(l2, l1).to(mask.dtype) * mask).sum() / n


def verl_kl(logprob, ref, kind):
    if kind in ("k1", "kl"):
        return logprob - ref
    if kind == "abs":
        return (logprob - ref).abs()
    if kind in ("k2", "mse"):
        return 0.5 * (logprob - ref).square()
    d = torch.clamp(ref - logprob, -20, 20)
    return torch.clamp(torch.exp(d) - d - 1, -10, 10)


def verl_seq_mean(loss, mask, token_mean):
    count = mask.sum(-1)
    seq = (loss * mask).sum(-1) / (count + 1e-8) if token_mean else (loss * mask).sum(-1)
    keep = (count > 0).to(loss.dtype)
    return (seq * keep).sum() / keep.sum()


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(2, 6), seq=st.integers(2, 6), seed=st.integers(0, 2**16))
def test_matches_verl_formulas_on_random_right_padded_batches(batch, seq, seed):
    gen = torch.Generator().manual_seed(seed)

    def randn():
        return torch.randn(batch, seq, generator=gen, dtype=F64)

    lengths = torch.randint(1, seq + 1, (batch,), generator=gen)
    lengths[0] = seq  # at least two counted tokens, so whitening is defined
    mask = (torch.arange(seq)[None, :] < lengths[:, None]).to(F64)  # right-padded, every row non-empty
    rewards, values, old, new, ref, adv = randn(), randn(), randn(), randn(), randn(), randn()
    index = torch.randint(0, 3, (batch,), generator=gen).tolist()

    for scale in (True, False):
        got = grpo_advantages(rewards, mask, index, eps=1e-6, scale_by_std=scale).advantages
        close(got, verl_grpo(rewards, mask, index, 1e-6, scale))
    close(rloo_advantages(rewards, mask, index).advantages, verl_rloo(rewards, mask, index))

    got_adv, got_returns = reinforce_pp_advantages(rewards, mask, gamma=0.9)
    want_adv, want_returns = verl_reinforce_pp(rewards, mask, 0.9)
    close(got_adv, want_adv)
    close(got_returns, want_returns * mask)  # verl leaves r_t at padded positions; ours are 0

    for got, want in zip(
        gae_advantages(rewards, values, mask, 0.99, 0.95), verl_gae(rewards, values, mask, 0.99, 0.95), strict=True
    ):
        close(got, want)

    for got, want in zip(
        policy_loss(old, new, adv, mask, 0.2, 0.28, 3.0), verl_policy_loss(old, new, adv, mask, 0.2, 0.28, 3.0),
        strict=True,
    ):
        close(got, want)
    for got, want in zip(
        value_loss(new, values, old, mask, 0.5), verl_value_loss(new, values, old, mask, 0.5), strict=True
    ):
        close(got, want)

    for kind in ("k1", "abs", "k2", "k3"):
        close(kl_penalty(new, ref, kind), verl_kl(new, ref, kind))

    close(aggregate_loss(rewards, mask, "token-mean"), (rewards * mask).sum() / mask.sum())
    close(aggregate_loss(rewards, mask, "seq-mean-token-sum"), verl_seq_mean(rewards, mask, token_mean=False))
    close(aggregate_loss(rewards, mask, "seq-mean-token-mean"), verl_seq_mean(rewards, mask, token_mean=True))


def test_aggregation_shares_by_hand():
    whole = t([[1, 1, 0], [1, 0, 0], [0, 0, 0], [1, 1, 1]])  # 6 tokens; 3 non-empty rows
    part = whole[:2]  # 3 tokens; 2 non-empty rows
    assert aggregation_share(part, whole, "token-mean") == 0.5
    assert aggregation_share(part, whole, "token-sum") == 1.0
    for mode in ("seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"):
        assert aggregation_share(part, whole, mode) == pytest.approx(2 / 3, abs=1e-15)
    assert aggregation_share(whole[2:3], whole[2:3], "token-mean") == 0.0  # an empty batch
    with pytest.raises(ValueError, match="mode 'mean'"):
        aggregation_share(part, whole, "mean")


@pytest.mark.parametrize("mode", list(AGGREGATORS))
def test_shares_make_micro_batch_losses_and_gradients_add_up_to_the_batch(mode):
    gen = torch.Generator().manual_seed(3)
    loss_mat = torch.randn(5, 4, generator=gen, dtype=F64, requires_grad=True)
    mask = t([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1]])
    whole = aggregate_loss(loss_mat, mask, mode)
    (want,) = torch.autograd.grad(whole, loss_mat)
    parts = sum(aggregation_share(mask[rows], mask, mode) * aggregate_loss(loss_mat[rows], mask[rows], mode)
                for rows in (slice(0, 2), slice(2, 3), slice(3, 5)))
    (got,) = torch.autograd.grad(parts, loss_mat)
    close(parts, whole)
    close(got, want)


def test_explained_variance_by_hand():
    returns = t([[1.0, 2.0, 9.0], [3.0, 0.0, 0.0]])
    mask = t([[1, 1, 0], [1, 0, 0]])  # counted returns 1, 2, 3: unbiased variance 1
    values = t([[1.0, 1.0, -5.0], [4.0, 7.0, 7.0]])  # residuals 0, 1, -1: unbiased variance 1
    close(explained_variance(values, returns, mask), 1.0 - 1.0 / (1.0 + 1e-5))
    close(explained_variance(returns, returns, mask), 1.0)
    close(explained_variance(returns - 7.0, returns, mask), 1.0)  # a constant offset costs nothing
    assert math.isnan(float(explained_variance(values, returns, t([[1, 0, 0], [0, 0, 0]]))))
