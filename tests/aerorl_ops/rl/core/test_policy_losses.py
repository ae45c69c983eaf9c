"""GSPO, GMPO, SAPO, CISPO and DAPO's overlong penalty on hand-computed tensors, and against verl's
formulas re-written here (verl's files are not imported)."""

import math

import pytest
import torch

from aerorl_ops.rl.core.policy_losses import (
    cispo_policy_loss,
    gmpo_policy_loss,
    gspo_policy_loss,
    overlong_penalty,
    row_share,
    sapo_policy_loss,
)

TOL = {"atol": 1e-6, "rtol": 1e-6}
F64 = torch.float64
NAN = float("nan")
MASK = [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]  # row 0 counts 2 tokens, row 1 counts 3; (0, 2) is padding


def t(rows, grad=False):
    return torch.tensor(rows, dtype=F64, requires_grad=grad)


def close(actual, expected):
    torch.testing.assert_close(actual, torch.as_tensor(expected, dtype=actual.dtype), **TOL)


def grad_of(loss_fn, logprob_rows, *args, **kwargs):
    """The loss and d loss / d logprob, with NaN poisoning logprob's padding position when it has one."""
    logprob = t(logprob_rows, grad=True)
    out = loss_fn(logprob, *args, **kwargs)
    out.loss.backward()
    return out, logprob.grad


# --- GSPO -----------------------------------------------------------------------------------------


def gspo(logprob, advantages, agg_mode="seq-mean-token-mean", old=None):
    old = t([[0.0, 0.0, NAN], [0.0, 0.0, 0.0]]) if old is None else old
    return gspo_policy_loss(old, logprob, t(advantages), t(MASK), 0.2, 0.2, agg_mode)


def test_gspo_clips_the_sequence_ratio_and_a_clipped_row_has_no_gradient():
    # old = 0, so log-ratios are the log-probs; clip range [0.8, 1.2].
    # Row 0: (0.1, -0.1) -> s_0 = exp(0) = 1, A = 2, not clipped: tokens -2 * 1 = -2.
    # Row 1: (0.9, 0, 0) -> s_1 = exp(0.3) = 1.35 > 1.2 with A = 1 > 0: the clip binds, tokens
    # -1 * 1.2 = -1.2, and the clipped constant carries no gradient.
    out, grad = grad_of(gspo, [[0.1, -0.1, NAN], [0.9, 0.0, 0.0]], [[2.0, 2.0, NAN], [1.0, 1.0, 1.0]])
    close(out.loss, (-2.0 + -1.2) / 2)  # seq-mean-token-mean over the two rows
    # d/dlogprob_t of row 0: -A * s_0 / (n_0 * rows) = -2 * 1 / (2 * 2); row 1 clipped: 0; padding: 0
    close(grad, [[-0.5, -0.5, 0.0], [0.0, 0.0, 0.0]])
    close(out.clipfrac, 3 / 5)  # the three tokens of row 1
    close(out.approx_kl, -(0.1 - 0.1 + 0.9) / 5)  # masked mean of old - new
    close(out.dual_clipfrac, 0.0)


def test_gspo_gradient_is_minus_a_times_the_sequence_ratio_per_token():
    # Row 1: (0.3, 0, 0) -> s_1 = exp(0.1), A = -1, not clipped: tokens -(-1) * exp(0.1)
    out, grad = grad_of(gspo, [[0.1, -0.1, NAN], [0.3, 0.0, 0.0]], [[2.0, 2.0, NAN], [-1.0, -1.0, -1.0]])
    s1 = math.exp(0.1)
    close(out.loss, (-2.0 + s1) / 2)
    # d s_it / d logprob_t = s_it (only the token's own log-prob; s_i is stopped): -A * s_i / (n_i * 2)
    close(grad, [[-0.5, -0.5, 0.0], [s1 / 6, s1 / 6, s1 / 6]])
    close(out.clipfrac, 0.0)


def test_gspo_takes_the_aggregation_mode():
    out = gspo(t([[0.1, -0.1, NAN], [0.9, 0.0, 0.0]]), [[2.0, 2.0, NAN], [1.0, 1.0, 1.0]], "token-mean")
    close(out.loss, (2 * -2.0 + 3 * -1.2) / 5)


def test_gspo_log_ratio_clamp_at_10_stops_the_gradient():
    # one token, log-ratio 12 > 10: s = exp(10), A = -1 so the unclipped term wins: loss exp(10), gradient 0
    logprob = t([[12.0]], grad=True)
    out = gspo_policy_loss(t([[0.0]]), logprob, t([[-1.0]]), t([[1.0]]), 0.2, 0.2, "seq-mean-token-mean")
    out.loss.backward()
    close(out.loss, math.exp(10.0))
    close(logprob.grad, [[0.0]])


def test_gspo_old_logprob_gets_no_gradient():
    old = t([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], grad=True)
    gspo(t([[0.1, -0.1, NAN], [0.3, 0.0, 0.0]], grad=True), [[2.0, 2.0, NAN], [-1.0] * 3], old=old).loss.backward()
    assert old.grad is None  # s_i is stopped: only the token's own log-prob carries gradient


# --- GMPO -----------------------------------------------------------------------------------------

GMPO_OLD = [[0.0, 0.0, NAN], [0.0, 0.0, 0.0]]


def gmpo(logprob, advantages, mask=MASK, old=GMPO_OLD):
    return gmpo_policy_loss(t(old), logprob, t(advantages), t(mask), 0.2, 0.2)


def test_gmpo_clips_the_log_ratio_by_the_sign_of_the_advantage():
    # clip range [-0.2, 0.2] on the log-ratio x (old = 0, so x = logprob).
    # Row 0, A = +1: x = (0.5, -0.5) -> min(x, clamp x) = (0.2, -0.5): only the rise is clipped.
    #   ratio_0 = exp((0.2 - 0.5) / 2) = exp(-0.15); loss_0 = -1 * exp(-0.15)
    # Row 1, A = -1: x = (0.5, -0.5, 0.1) -> max(x, clamp x) = (0.5, -0.2, 0.1): only the fall is clipped.
    #   ratio_1 = exp(0.4 / 3); loss_1 = +exp(0.4 / 3)
    out, grad = grad_of(gmpo, [[0.5, -0.5, NAN], [0.5, -0.5, 0.1]], [[1.0, 1.0, NAN], [-1.0, -1.0, -1.0]])
    r0, r1 = math.exp(-0.15), math.exp(0.4 / 3)
    close(out.loss, (-r0 + r1) / 2)  # mean over the B = 2 rows
    # d/dx_t = -A_i * ratio_i / (n_i * B) where x_t is kept, 0 where it is clipped
    close(grad, [[0.0, -r0 / 4, 0.0], [r1 / 6, 0.0, r1 / 6]])
    # verl's statistics: x outside [-0.2, 0.2] with A > 0 (row 0: both) / with A < 0 (row 1: two)
    close(out.clipfrac, 2 / 5)
    close(out.dual_clipfrac, 2 / 5)
    close(out.approx_kl, -(0.5 - 0.5 + 0.5 - 0.5 + 0.1) / 5)


def test_gmpo_averages_over_every_row_including_an_empty_one():
    logprob, adv = [[0.5, -0.5, 0.0], [0.5, -0.5, 0.1]], [[1.0, 1.0, 0.0], [-1.0, -1.0, -1.0]]
    two = gmpo(t(logprob), adv, old=[[0.0] * 3] * 2)
    three = gmpo(t([*logprob, [NAN] * 3]), [*adv, [NAN] * 3], mask=[*MASK, [0.0] * 3], old=[[0.0] * 3] * 3)
    close(three.loss, two.loss * 2 / 3)  # the empty row adds 0 to the sum and 1 to the count, as verl's torch.mean


def test_gmpo_row_shares_sum_micro_batch_losses_to_the_batch_loss():
    g = torch.Generator().manual_seed(0)
    mask = t([[1, 1, 0, 1], [0, 0, 0, 0], [1, 0, 1, 1], [1, 1, 1, 0], [0, 1, 1, 1]])
    old, new = -torch.rand(5, 4, generator=g, dtype=F64), -torch.rand(5, 4, generator=g, dtype=F64)
    adv = torch.randn(5, 1, generator=g, dtype=F64).expand(5, 4)
    whole = gmpo_policy_loss(old, new, adv, mask, 0.2, 0.3).loss
    parts = [slice(0, 2), slice(2, 3), slice(3, 5)]
    shares = [row_share(mask[p], mask) for p in parts]
    assert shares == [2 / 5, 1 / 5, 2 / 5]
    summed = sum(
        s * gmpo_policy_loss(old[p], new[p], adv[p], mask[p], 0.2, 0.3).loss for s, p in zip(shares, parts, strict=True)
    )
    torch.testing.assert_close(summed, whole, atol=1e-12, rtol=0)
    assert row_share(mask[:0], mask[:0]) == 0.0


# --- SAPO -----------------------------------------------------------------------------------------


def sapo(logprob, advantages):
    return sapo_policy_loss(t([[0.0, 0.0, NAN], [0.0, 0.0, 0.0]]), logprob, t(advantages), t(MASK), 2.0, 4.0)


def test_sapo_gate_at_ratio_one_and_its_slope():
    # r = 1 everywhere: gate = sigmoid(0) * 4 / tau = 2 / tau; slope d gate / dr = 4 s (1 - s) = 1 at r = 1
    # Row 0, A = +1, tau_pos = 2: gate 1, tokens -1. Row 1, A = -1, tau_neg = 4: gate 0.5, tokens +0.5.
    out, grad = grad_of(sapo, [[0.0, 0.0, NAN], [0.0, 0.0, 0.0]], [[1.0, 1.0, NAN], [-1.0, -1.0, -1.0]])
    close(out.loss, (-1.0 + 0.5) / 2)  # seq-mean-token-mean
    close(grad, [[-1 / 4, -1 / 4, 0.0], [1 / 6, 1 / 6, 1 / 6]])  # -A * 1 * r / (n_i * 2)
    close(out.clipfrac, 0.0)
    close(out.dual_clipfrac, 0.0)
    close(out.approx_kl, 0.0)


def test_sapo_gate_away_from_ratio_one():
    # Row 0 token 0 has r = 2 (log 2), A = 1, tau = 2: gate = 2 sigmoid(2), d gate / d logprob = 4 s (1 - s) r
    out, grad = grad_of(sapo, [[math.log(2.0), 0.0, NAN], [0.0, 0.0, 0.0]], [[1.0, 1.0, NAN], [-1.0, -1.0, -1.0]])
    s = 1 / (1 + math.exp(-2.0))
    close(out.loss, ((-2 * s - 1.0) / 2 + 0.5) / 2)
    close(grad[0, 0], -4 * s * (1 - s) * 2.0 / 4)
    close(out.approx_kl, -math.log(2.0) / 5)


# --- CISPO ----------------------------------------------------------------------------------------

# log-ratios d chosen so r = exp(d) is (1.5, 0.5 | 1.0, 1.1, 0.7); clipped to [0.8, 1.2]: (1.2, 0.8 | 1.0, 1.1, 0.8)
CISPO_LOGPROB = [[-1.0, -2.0, NAN], [-0.5, -1.0, -1.5]]
CISPO_D = [[math.log(1.5), math.log(0.5), 0.0], [0.0, math.log(1.1), math.log(0.7)]]
CISPO_OLD = t(CISPO_LOGPROB) - t(CISPO_D)  # NaN at the padding, like the log-prob
CISPO_ADV = [[1.0, 1.0, NAN], [-2.0, -2.0, -2.0]]


def cispo(logprob, old=None, agg_mode="token-mean"):
    old = CISPO_OLD if old is None else old
    return cispo_policy_loss(old, logprob, t(CISPO_ADV), t(MASK), 0.2, 0.2, agg_mode)


def test_cispo_weights_reinforce_by_the_stopped_clipped_ratio():
    # tokens -clip(r) * A * logprob: 1.2, 1.6 | -1.0, -2.2, -2.4 -> token-mean -2.8 / 5
    out, grad = grad_of(cispo, CISPO_LOGPROB)
    close(out.loss, -2.8 / 5)
    # -clip(r) * A / 5, the ratio's own dependence on logprob stopped
    close(grad, [[-1.2 / 5, -0.8 / 5, 0.0], [2.0 / 5, 2.2 / 5, 1.6 / 5]])
    close(out.clipfrac, 3 / 5)  # r = 1.5, 0.5, 0.7
    close(out.approx_kl, -sum(CISPO_D[0][:2] + CISPO_D[1]) / 5)
    close(out.dual_clipfrac, 0.0)


def test_cispo_gives_no_gradient_through_the_ratio_and_takes_the_aggregation_mode():
    old = CISPO_OLD.clone().requires_grad_()
    out = cispo(t(CISPO_LOGPROB, grad=True), old=old, agg_mode="seq-mean-token-mean")
    out.loss.backward()
    assert old.grad is None
    close(out.loss, ((1.2 + 1.6) / 2 + (-1.0 - 2.2 - 2.4) / 3) / 2)


def test_cispo_with_no_lower_bound_as_in_the_paper():
    out = cispo_policy_loss(CISPO_OLD, t(CISPO_LOGPROB), t(CISPO_ADV), t(MASK), 10.0, 0.2, "token-mean")
    close(out.loss, (1.2 + 0.5 * 2.0 - 1.0 - 2.2 - 0.7 * 2.0 * 1.5) / 5)  # r = 0.5 and 0.7 kept
    close(out.clipfrac, 1 / 5)


# --- masking --------------------------------------------------------------------------------------

LOSSES = {
    "gspo": lambda o, n, a, m: gspo_policy_loss(o, n, a, m, 0.2, 0.28, "seq-mean-token-mean"),
    "gmpo": lambda o, n, a, m: gmpo_policy_loss(o, n, a, m, 0.4, 0.4),
    "sapo": lambda o, n, a, m: sapo_policy_loss(o, n, a, m, 1.0, 1.05),
    "cispo": lambda o, n, a, m: cispo_policy_loss(o, n, a, m, 0.2, 0.28, "token-mean"),
}


@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize("poison", [NAN, float("inf")])
def test_uncounted_positions_never_reach_value_or_gradient(name, poison):
    mask = t([[1, 0, 1, 1], [0, 0, 0, 0], [1, 1, 0, 1]])
    g = torch.Generator().manual_seed(1)
    old, new = -torch.rand(3, 4, generator=g, dtype=F64), -torch.rand(3, 4, generator=g, dtype=F64)
    adv = torch.randn(3, 4, generator=g, dtype=F64)

    def poisoned_at_padding(x):
        return torch.where(mask > 0, x, poison)

    clean_new, poisoned_new = new.clone().requires_grad_(), poisoned_at_padding(new).requires_grad_()
    clean = LOSSES[name](old, clean_new, adv, mask)
    poisoned = LOSSES[name](poisoned_at_padding(old), poisoned_new, poisoned_at_padding(adv), mask)
    clean.loss.backward()
    poisoned.loss.backward()
    for a, b in zip(clean, poisoned, strict=True):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    assert torch.isfinite(poisoned_new.grad).all()
    assert torch.equal(poisoned_new.grad[mask == 0], torch.zeros(int((mask == 0).sum()), dtype=F64))
    torch.testing.assert_close(poisoned_new.grad, clean_new.grad, atol=0, rtol=0)


# --- verl's formulas, re-written --------------------------------------------------------------------


def verl_agg(loss, mask, mode, eps):
    if mode == "token-mean":
        return (loss * mask).sum() / mask.sum()
    n = mask.sum(-1)
    nonempty = (n > 0).to(loss.dtype)
    return ((loss * mask).sum(-1) / (n + eps) * nonempty).sum() / nonempty.sum()  # seq-mean-token-mean


def verl_gspo(old, new, adv, mask, lo, hi, eps):
    seq = ((new - old) * mask).sum(-1) / mask.sum(-1).clamp(min=1)
    s = torch.exp(torch.clamp(new - new.detach() + seq.detach().unsqueeze(-1), max=10.0))
    return verl_agg(torch.maximum(-adv * s, -adv * torch.clamp(s, 1 - lo, 1 + hi)), mask, "seq-mean-token-mean", eps)


def verl_gmpo(old, new, adv, mask, lo, hi, eps):
    x, g = new - old, torch.sign(adv)
    c = g * torch.min(g * x, g * torch.clamp(x, -lo, hi))
    n = mask.sum(-1)
    return torch.mean(-((adv * mask).sum(-1) / (n + eps)) * torch.exp((c * mask).sum(-1) / (n + eps)))


def verl_sapo(old, new, adv, mask, tau_pos, tau_neg, eps):
    r = torch.exp(torch.clamp(new - old, -20.0, 20.0))
    tau = torch.where(adv > 0, torch.as_tensor(tau_pos, dtype=F64), torch.as_tensor(tau_neg, dtype=F64))
    return verl_agg(-torch.sigmoid(tau * (r - 1.0)) * (4.0 / tau) * adv, mask, "seq-mean-token-mean", eps)


def verl_cispo(old, new, adv, mask, lo, hi, mode, eps):
    r = torch.exp(torch.clamp(new - old, -20.0, 20.0))
    return verl_agg(-torch.clamp(r, 1 - lo, 1 + hi).detach() * adv * new, mask, mode, eps)


VERL_PAIRS = {
    "gspo": (LOSSES["gspo"], lambda o, n, a, m, eps: verl_gspo(o, n, a, m, 0.2, 0.28, eps)),
    "gmpo": (LOSSES["gmpo"], lambda o, n, a, m, eps: verl_gmpo(o, n, a, m, 0.4, 0.4, eps)),
    "sapo": (LOSSES["sapo"], lambda o, n, a, m, eps: verl_sapo(o, n, a, m, 1.0, 1.05, eps)),
    "cispo": (LOSSES["cispo"], lambda o, n, a, m, eps: verl_cispo(o, n, a, m, 0.2, 0.28, "token-mean", eps)),
    "cispo-seq": (
        lambda o, n, a, m: cispo_policy_loss(o, n, a, m, 0.2, 0.28, "seq-mean-token-mean"),
        lambda o, n, a, m, eps: verl_cispo(o, n, a, m, 0.2, 0.28, "seq-mean-token-mean", eps),
    ),
}


@pytest.mark.parametrize("name", list(VERL_PAIRS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_verl_formula_value_and_gradient(name, seed):
    ours_fn, verl_fn = VERL_PAIRS[name]
    g = torch.Generator().manual_seed(seed)
    mask = t([[1, 1, 0, 1, 1, 0], [1, 0, 0, 1, 1, 1], [0, 1, 1, 1, 0, 1], [1, 1, 1, 1, 1, 1]])  # interior gaps
    old = -torch.rand(4, 6, generator=g, dtype=F64) * 2
    new = old + 0.3 * torch.randn(4, 6, generator=g, dtype=F64)  # ratios around 1, some clipped
    adv = torch.randn(4, 6, generator=g, dtype=F64)
    ours_new, verl_new = new.clone().requires_grad_(), new.clone().requires_grad_()
    ours = ours_fn(old, ours_new, adv, mask).loss
    exact = verl_fn(old, verl_new, adv, mask, 0.0)  # verl's formula with its +1e-8 removed
    ours.backward()
    exact.backward()
    torch.testing.assert_close(ours, exact, atol=1e-12, rtol=0)
    torch.testing.assert_close(ours_new.grad, verl_new.grad, atol=1e-12, rtol=0)
    # verl's own +1e-8 moves the value by about |loss| * 1e-8 / n_i, no more
    torch.testing.assert_close(ours.detach(), verl_fn(old, new, adv, mask, 1e-8).detach(), atol=1e-8, rtol=0)


# --- DAPO's overlong penalty ----------------------------------------------------------------------


def test_overlong_penalty_below_inside_and_beyond_the_buffer():
    # max 20, buffer 4: free up to 16 tokens, then -(L - 16) / 4 * factor
    lengths = torch.tensor([10, 16, 18, 20, 22])
    close(overlong_penalty(lengths, 20, 4, 1.0), [0.0, 0.0, -0.5, -1.0, -1.5])
    close(overlong_penalty(lengths, 20, 4, 2.0), [0.0, 0.0, -1.0, -2.0, -3.0])
    assert overlong_penalty(lengths, 20, 4, 1.0).dtype == torch.get_default_dtype()
    assert overlong_penalty(lengths.to(F64), 20, 4, 1.0).dtype == F64
    close(overlong_penalty(lengths, 20, 20, 1.0), [-0.5, -0.8, -0.9, -1.0, -1.1])  # the whole range is the buffer


# --- argument errors ------------------------------------------------------------------------------

OLD, NEW, ADV, M = t([[0.0, 0.0]]), t([[0.1, 0.1]]), t([[1.0, 1.0]]), t([[1.0, 1.0]])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: gspo_policy_loss(OLD, NEW, ADV, M, 0.0, 0.2, "token-mean"), "clip_low"),
        (lambda: gspo_policy_loss(OLD, NEW, ADV, M, 0.2, 1.0, "token-mean"), "clip_high"),
        (lambda: gspo_policy_loss(OLD, NEW, ADV, M, 0.2, 0.2, "mean"), "agg_mode"),
        (lambda: gspo_policy_loss(OLD, NEW, ADV, t([[1.0, 1.0, 1.0]]), 0.2, 0.2, "token-mean"), "response_mask"),
        (lambda: gmpo_policy_loss(OLD, NEW, ADV, M, -0.1, 0.2), "clip_low"),
        (lambda: gmpo_policy_loss(OLD, NEW, ADV, M, 0.2, 0.0), "clip_high"),
        (lambda: gmpo_policy_loss(OLD, NEW, t([1.0, 1.0]), M, 0.2, 0.2), "advantages"),
        (lambda: sapo_policy_loss(OLD, NEW, ADV, M, 0.0, 1.0), "tau_pos"),
        (lambda: sapo_policy_loss(OLD, NEW, ADV, M, 1.0, -1.0), "tau_neg"),
        (lambda: sapo_policy_loss(OLD[0], NEW, ADV, M, 1.0, 1.0), "old_logprob"),
        (lambda: cispo_policy_loss(OLD, NEW, ADV, M, 0.0, 0.2, "token-mean"), "clip_low"),
        (lambda: cispo_policy_loss(OLD, NEW, ADV, M, 0.2, -1.0, "token-mean"), "clip_high"),
        (lambda: cispo_policy_loss(OLD, NEW, ADV, M, 0.2, 0.2, "seq"), "agg_mode"),
        (lambda: overlong_penalty(torch.tensor([[1, 2]]), 20, 4, 1.0), "response_lengths"),
        (lambda: overlong_penalty(torch.tensor([1]), 0, 1, 1.0), "max_response_length"),
        (lambda: overlong_penalty(torch.tensor([1]), 20, 0, 1.0), "buffer_length"),
        (lambda: overlong_penalty(torch.tensor([1]), 20, 21, 1.0), "buffer_length"),
        (lambda: overlong_penalty(torch.tensor([1]), 20, 4, -0.5), "penalty_factor"),
        (lambda: row_share(M, M[0]), "batch_mask"),
        (lambda: row_share(t([[1.0, 1.0, 1.0]]), M), "part_mask"),
    ],
)
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()
