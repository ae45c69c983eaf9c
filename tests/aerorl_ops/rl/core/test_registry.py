"""One registry of policy losses (``rl.core.registry``): the names a run may choose are the ones registered, a
loss added with the decorator is chosen by name, and what it declares decides how micro-batches weigh it."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import aerorl_ops.rl.core.policy_losses  # noqa: F401  (registers gspo, gmpo, sapo, cispo; functional ppo)
from aerorl_ops.config.algorithms import POLICY_LOSSES
from aerorl_ops.rl.core.functional import AGGREGATORS, PolicyLoss, policy_loss
from aerorl_ops.rl.core.registry import (
    IS_WEIGHT,
    POLICY_LOSS_REGISTRY,
    ROWS,
    register_policy_loss,
    registered_policy_loss,
)
from aerorl_ops.rl.step.loss import RLLoss, Targets

LOSS = RLLoss(agg_mode="token-mean", clip_low=0.2, clip_high=0.5, dual_clip_c=3.0, kl_coef=0.0, kl_kind="k3",
              entropy_coef=0.0, value_coef=0.5, value_clip=0.5)


def test_the_registered_losses_are_the_declared_names_in_their_order():
    assert tuple(POLICY_LOSS_REGISTRY) == POLICY_LOSSES
    assert {name: loss.aggregation for name, loss in POLICY_LOSS_REGISTRY.items()} == {
        "ppo": None, "gspo": None, "gmpo": ROWS, "sapo": "seq-mean-token-mean", "cispo": None}
    assert registered_policy_loss("ppo").loss is policy_loss


def test_what_a_loss_takes_is_rllosss_fields_and_its_aggregation_is_known():
    fields = {f.name for f in dataclasses.fields(RLLoss)} | {IS_WEIGHT}
    for loss in POLICY_LOSS_REGISTRY.values():
        assert set(loss.settings) <= fields, loss.name
        assert loss.aggregation in (None, ROWS, *AGGREGATORS), loss.name
    assert [name for name, loss in POLICY_LOSS_REGISTRY.items() if loss.takes_is_weight] == ["ppo"]
    assert registered_policy_loss("sapo").settings == ("tau_pos", "tau_neg")


def test_a_loss_registered_once_is_chosen_by_name_with_its_own_aggregation():
    @register_policy_loss("toy", aggregation="token-sum")
    def toy(old_logprob, logprob, advantages, response_mask, clip_high):
        counted = response_mask.to(logprob.dtype)  # [B, T]
        loss = -(advantages * logprob * counted).sum() * clip_high  # []
        zero = loss.new_zeros(())
        return PolicyLoss(loss, zero, zero, zero)

    try:
        logprob = torch.tensor([[-1.0, -2.0], [-0.5, 0.0]])
        mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
        targets = Targets(old_logprob=logprob, advantages=torch.tensor([[1.0, 2.0], [-2.0, 9.0]]),
                          returns=torch.zeros(2, 2), mask=mask, ref_logprob=None, old_values=None)
        part, _ = dataclasses.replace(LOSS, policy_loss="toy")(logprob, torch.zeros(2, 2), None, targets)
        # -(1 x -1 + 2 x -2 + -2 x -0.5) x 0.5 = -(-1 - 4 + 1) x 0.5 = 2 (the padded 9 x 0 does not count)
        assert part.value == 2.0
        shares = dataclasses.replace(LOSS, policy_loss="toy").shares(mask[:1], mask)
        assert tuple(shares) == (1.0, 2 / 3)  # token-sum's share is 1, token-mean's 2 of 3 counted tokens
    finally:
        del POLICY_LOSS_REGISTRY["toy"]


def test_a_name_registered_twice_or_a_loss_without_the_four_tensors_is_refused():
    with pytest.raises(ValueError, match=r"^policy loss 'ppo' of .*\.again is registered already, by "
                                         r"aerorl_ops\.rl\.core\.functional\.policy_loss: choose another name$"):
        @register_policy_loss("ppo")
        def again(old_logprob, logprob, advantages, response_mask):
            raise AssertionError

    with pytest.raises(ValueError, match=r"^policy loss 'odd' \(.*\.odd\) must take old_logprob, logprob, "
                                         r"advantages, response_mask first, then its settings; it takes "
                                         r"logprob, old_logprob, advantages, response_mask$"):
        @register_policy_loss("odd")
        def odd(logprob, old_logprob, advantages, response_mask):
            raise AssertionError

    assert tuple(POLICY_LOSS_REGISTRY) == POLICY_LOSSES


def test_an_unknown_loss_lists_the_registered_ones_and_weights_go_to_ppo_only():
    targets = Targets(old_logprob=torch.zeros(1, 1), advantages=torch.ones(1, 1), returns=torch.zeros(1, 1),
                      mask=torch.ones(1, 1), ref_logprob=None, old_values=None, is_weight=torch.ones(1, 1))
    with pytest.raises(ValueError, match=r"^unknown policy_loss 'ppo2'; registered: ppo, gspo, gmpo, sapo, cispo$"):
        dataclasses.replace(LOSS, policy_loss="ppo2")(torch.zeros(1, 1), torch.zeros(1, 1), None, targets)
    with pytest.raises(ValueError, match=r"^importance weights apply to the ppo policy loss only, not 'gspo'$"):
        dataclasses.replace(LOSS, policy_loss="gspo")(torch.zeros(1, 1), torch.zeros(1, 1), None, targets)
