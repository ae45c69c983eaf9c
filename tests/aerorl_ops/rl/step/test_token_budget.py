"""Token-budget micro-batches: hand-checked cuts, and the same gradient as contiguous micro-batches
through the embedded tiny model (each micro-batch weighted by its ``RLLoss.shares``)."""

from __future__ import annotations

import doctest

import pytest
import torch

from aerorl_ops.rl.step import token_budget
from aerorl_ops.rl.step.token_budget import padded_fraction, token_budget_parts


def test_the_docstring_examples():
    result = doctest.testmod(token_budget, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted == 4


def test_similar_lengths_share_a_micro_batch_within_the_budget():
    # sorted: 5 (row 0), 6 (row 4), 7 (row 2) -> 3 x 7 = 21; then 98 would make 4 x 98 = 392 > 200;
    # 98 (row 3), 100 (row 1) -> 2 x 100 = 200, exactly the budget
    assert token_budget_parts([5, 100, 7, 98, 6], 200) == [[0, 2, 4], [1, 3]]
    assert token_budget_parts([5, 100, 7, 98, 6], 199) == [[0, 2, 4], [3], [1]]


def test_ties_are_taken_in_row_order():
    assert token_budget_parts([3, 3, 3, 3], 6) == [[0, 1], [2, 3]]
    assert token_budget_parts([4, 2, 4, 2], 8) == [[1, 3], [0, 2]]


def test_a_row_longer_than_the_budget_is_alone():
    assert token_budget_parts([300, 4, 4, 301], 10) == [[1, 2], [0], [3]]
    assert token_budget_parts([], 10) == []


@pytest.mark.parametrize("max_tokens", [1, 7, 40, 1000])
def test_every_row_once_and_the_budget_respected(max_tokens):
    lengths = [int(n) for n in torch.randint(1, 60, (37,), generator=torch.Generator().manual_seed(3))]
    parts = token_budget_parts(lengths, max_tokens)
    assert sorted(row for part in parts for row in part) == list(range(37))
    for part in parts:
        assert part == sorted(part)
        assert len(part) == 1 or len(part) * max(lengths[row] for row in part) <= max_tokens


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="max_tokens must be a positive token count, got 0"):
        token_budget_parts([1], 0)
    with pytest.raises(ValueError, match="row 1 has a negative length -2"):
        token_budget_parts([1, -2], 10)


def test_padded_fraction_by_hand():
    lengths = [5, 100, 7, 98, 6]
    # contiguous [0, 1], [2, 3], [4]: padded 200 + 196 + 6 = 402, real 216 -> 186 / 402
    assert padded_fraction(lengths, [[0, 1], [2, 3], [4]]) == pytest.approx(186 / 402)
    # by budget: padded 21 + 200 = 221, real 216 -> 5 / 221
    assert padded_fraction(lengths, token_budget_parts(lengths, 200)) == pytest.approx(5 / 221)
    assert padded_fraction([], []) == 0.0


REPLY_LENGTHS = [1, 9, 2, 8, 3, 7]  # counted tokens per row, EOS included: long and short rows interleaved


def _gradients(loaded, env, replies, targets, loss, parts) -> dict[str, torch.Tensor]:
    """Summed parameter gradients of ``loss`` over ``parts`` (lists of rows), each micro-batch weighted
    by its share of the whole batch, as ``RLTrainer._update`` does."""
    from aerorl_ops.rl.step.rollout import reply_batches
    from aerorl_ops.rl.step.sequences import completion_tokens
    from aerorl_ops.rl.step.step_parts import response_layout

    model = loaded.model
    model.zero_grad(set_to_none=True)
    batches = reply_batches(loaded, env, [[env.items[row] for row in part] for part in parts],
                            [[replies[row] for row in part] for part in parts])
    for batch, part in zip(batches, parts, strict=True):
        rows = targets.rows(torch.tensor(part))  # [b', L]
        shares = loss.shares(rows.mask, targets.mask)
        tokens = completion_tokens(model, batch)  # [n], [n], [n, H]
        part_loss, _ = loss(response_layout(tokens.logprobs, rows.mask), response_layout(tokens.entropy, rows.mask),
                            None, rows, shares)
        part_loss.weighted.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("agg_mode", ["token-mean", "seq-mean-token-mean"])
def test_token_budget_parts_give_the_contiguous_micro_batches_gradient(fresh_tiny_vlm, agg_mode):
    from aerorl_ops.envs.registry import make_env
    from aerorl_ops.eval_runner.episodes import micro_batches
    from aerorl_ops.generation.batched import eos_token_ids
    from aerorl_ops.rl.step.loss import RLLoss, Targets
    from aerorl_ops.rl.step.rollout import reply_batches
    from aerorl_ops.rl.step.step_parts import response_mask

    loaded = fresh_tiny_vlm
    env = make_env("easy_vqa", split="train", limit=8, seed=1)
    words = loaded.tokenizer.encode("one two three four five six seven eight nine", add_special_tokens=False)
    eos = eos_token_ids(loaded)[0]
    replies = [words[: n - 1] + [eos] for n in REPLY_LENGTHS]
    (whole_batch,) = reply_batches(loaded, env, [env.items[:6]], [replies])
    lengths = [int(n) for n in whole_batch.inputs["attention_mask"].sum(1)]  # prompt + reply
    width = max(lengths)
    budget_parts = token_budget_parts(lengths, 3 * width)
    contiguous = micro_batches(list(range(6)), 3)
    assert budget_parts != contiguous and len(budget_parts) <= len(contiguous)

    generator = torch.Generator().manual_seed(0)
    mask = response_mask(torch.tensor(REPLY_LENGTHS), max(REPLY_LENGTHS))  # [6, L]
    advantages = torch.randn(6, generator=generator)[:, None].expand_as(mask).clone()  # [6, L]
    old = (-1.0 - torch.rand(mask.shape, generator=generator)) * mask  # [6, L]
    targets = Targets(old, advantages, advantages, mask, None, None)
    loss = RLLoss(agg_mode=agg_mode, clip_low=0.2, clip_high=0.28, dual_clip_c=3.0, kl_coef=0.0, kl_kind="k3",
                  entropy_coef=0.01, value_coef=0.0, value_clip=0.5)

    expected = _gradients(loaded, env, replies, targets, loss, contiguous)
    got = _gradients(loaded, env, replies, targets, loss, budget_parts)
    assert expected.keys() == got.keys() and len(expected) > 0
    assert sum(float(g.abs().sum()) for g in expected.values()) > 0
    for name, gradient in expected.items():  # gradients up to ~1e-3 here; float32 reordering gives ~1e-10
        assert torch.allclose(got[name], gradient, rtol=1e-5, atol=1e-8), name
