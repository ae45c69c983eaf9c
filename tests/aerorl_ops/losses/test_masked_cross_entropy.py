import math

import pytest
import torch

from aerorl_ops.losses import (
    MaskedCrossEntropyLoss,
    masked_cross_entropy_loss,
    text_token_mask,
)


def hand_example():
    """4 positions, vocab 3: counted, counted, vision, ignore_index.

    Position 0: logits 0,0,0 -> p = 1/3 each, label 0, NLL = log 3.
    Position 1: logits log(1, 2, 1) -> p = (1/4, 1/2, 1/4), label 1, NLL = log 2.
    Positions 2 and 3 carry large logits that would dominate the loss if counted.
    """
    logits = torch.tensor(
        [[[0.0, 0.0, 0.0], [0.0, math.log(2.0), 0.0], [9.0, -9.0, 0.0], [-7.0, 7.0, 0.0]]],
        dtype=torch.float64,
        requires_grad=True,
    )  # [1, 4, 3]
    labels = torch.tensor([[0, 1, 1, -100]])  # [1, 4]
    vision_mask = torch.tensor([[False, False, True, False]])  # [1, 4]
    return logits, labels, vision_mask


def test_text_token_mask_excludes_vision_and_ignore_index():
    labels = torch.tensor([[1, 2, -100, 4], [-100, 5, 6, 7]])
    vision = torch.tensor([[True, False, False, True], [False, False, True, False]])
    expected = torch.tensor([[False, True, False, False], [False, True, False, True]])
    assert torch.equal(text_token_mask(labels, vision), expected)


def test_loss_matches_hand_computed_value_and_gradient():
    logits, labels, vision_mask = hand_example()
    loss = masked_cross_entropy_loss(logits, labels, vision_mask)
    assert loss.item() == pytest.approx((math.log(3.0) + math.log(2.0)) / 2, abs=1e-12)

    loss.backward()
    # dL/dz = (softmax - onehot) / N_counted with N_counted = 2; zero at excluded positions.
    expected = torch.tensor(
        [[[-1 / 3, 1 / 6, 1 / 6], [1 / 8, -1 / 4, 1 / 8], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]],
        dtype=torch.float64,
    )
    torch.testing.assert_close(logits.grad, expected, rtol=0, atol=1e-12)


def test_labels_are_not_shifted_inside_the_loss():
    # logits[b, t] is scored against labels[b, t]: a one-hot-ish logit at the label's own position wins.
    logits = torch.full((1, 2, 4), -20.0)
    logits[0, 0, 3] = 20.0
    logits[0, 1, 1] = 20.0
    aligned = masked_cross_entropy_loss(logits, torch.tensor([[3, 1]]), torch.zeros(1, 2, dtype=torch.bool))
    shifted = masked_cross_entropy_loss(logits, torch.tensor([[1, 3]]), torch.zeros(1, 2, dtype=torch.bool))
    assert aligned.item() < 1e-6
    assert shifted.item() > 30.0


def test_custom_ignore_index():
    logits, _, vision_mask = hand_example()
    labels = torch.tensor([[0, 1, 1, 7]])  # 7 is out of vocabulary; it must never be read
    loss = masked_cross_entropy_loss(logits, labels, vision_mask, ignore_index=7)
    assert loss.item() == pytest.approx(math.log(6.0) / 2, abs=1e-12)


def test_all_masked_gives_zero_loss_and_zero_grads():
    logits = torch.randn(2, 3, 5, requires_grad=True)
    labels = torch.tensor([[-100, 1, -100], [2, -100, 4]])
    vision_mask = torch.tensor([[False, True, False], [True, False, True]])
    loss = masked_cross_entropy_loss(logits, labels, vision_mask)
    loss.backward()
    assert loss.item() == 0.0
    assert torch.equal(logits.grad, torch.zeros_like(logits))


def test_module_returns_loss_and_detached_counts():
    logits, labels, vision_mask = hand_example()
    loss, stats = MaskedCrossEntropyLoss()(logits, labels, vision_mask)
    assert loss.item() == pytest.approx(math.log(6.0) / 2, abs=1e-12)
    assert stats.num_tokens.item() == 2
    assert stats.num_vision_tokens.item() == 1
    assert not stats.num_tokens.requires_grad


@pytest.mark.parametrize(
    ("logits_shape", "labels_shape", "vision_shape", "message"),
    [
        ((2, 3), (2, 3), (2, 3), "logits must have shape"),
        ((2, 3, 5), (2, 4), (2, 4), "labels has shape"),
        ((2, 3, 5), (2, 3), (2, 4), "vision_mask has shape"),
    ],
)
def test_shape_errors_name_the_argument(logits_shape, labels_shape, vision_shape, message):
    with pytest.raises(ValueError, match=message):
        masked_cross_entropy_loss(
            torch.zeros(logits_shape),
            torch.zeros(labels_shape, dtype=torch.long),
            torch.zeros(vision_shape, dtype=torch.bool),
        )
