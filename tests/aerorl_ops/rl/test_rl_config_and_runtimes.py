"""AeroRLConfig validation, AeroRL's quickstart, and lazily loaded runtimes."""

import pytest
import torch

from aerorl_ops.models.loading import ModelUnavailableError
from aerorl_ops.rl.config import AeroRLConfig
from aerorl_ops.rl.runtimes import wrap_vlm_for_rl
from aerorl_ops.rl.trainer import AeroRLTrainer


@pytest.mark.parametrize(("field", "value", "message"), [
    ("quant_ref_bits", 3, "quant_ref_bits"),
    ("trainer_backend", "deepspeed", "trainer_backend"),
    ("algorithm", "ppo2", "algorithm"),
    ("group_size", 1, "group_size"),
    ("kl_coef", -0.1, "kl_coef"),
    ("clip_low", 1.5, "clip_low"),
    ("clip_low", 0.0, "clip_low"),
    ("clip_high", 1.0, "clip_high"),
    ("kl_kind", "k4", "kl_kind"),
    ("kl_placement", "both", "kl_placement"),
    ("loss_agg_mode", "seq-sum", "loss_agg_mode"),
    ("ppo_epochs", 0, "ppo_epochs"),
    ("ppo_mini_batches", 0, "ppo_mini_batches"),
    ("dual_clip_c", 1.0, "dual_clip_c"),
    ("entropy_coef", -0.01, "entropy_coef"),
    ("gamma", 1.5, "gamma"),
    ("value_clip", 0.0, "value_clip"),
    ("learning_rate", float("nan"), "learning_rate"),
    ("top_p", 0.0, "top_p"),
])
def test_validate_names_the_bad_field(field, value, message):
    config = AeroRLConfig(**{field: value})
    with pytest.raises(ValueError, match=message):
        config.validate()


def test_reinforce_pp_accepts_a_group_of_one():
    AeroRLConfig(algorithm="reinforce_pp", group_size=1).validate()


def test_aerorl_quickstart_tensor_step_still_works():
    trainer = AeroRLTrainer(AeroRLConfig(mask_vision_tokens=True))
    assert trainer.on_train_start()["status"] == "started"
    logits = torch.zeros(1, 3, 4, requires_grad=True)  # uniform: every counted token costs log 4
    labels = torch.tensor([[1, 2, 3]])
    vision_mask = torch.tensor([[True, False, False]])
    result = trainer.train_step(logits=logits, labels=labels, vision_mask=vision_mask)
    assert result["step"] == 1
    assert result["loss"] == pytest.approx(torch.log(torch.tensor(4.0)).item(), rel=1e-6)
    assert logits.grad[0, 0].abs().sum() == 0  # the vision position got no gradient
    assert trainer.on_train_end() == {"status": "finished", "steps": 1, "backend": "torch"}


def test_runtimes_describe_without_loading_and_fail_clearly_on_use(tmp_path):
    missing = str(tmp_path / "no-such-model")
    policy, reference = wrap_vlm_for_rl(missing, AeroRLConfig(quant_ref_bits=4), device="cpu")
    assert reference.quantization_mode == "bitsandbytes-nf4"
    assert reference.as_dict()["precision"] == "nf4"
    assert policy.as_dict()["trainer"]["backend"] == "torch"
    with pytest.raises(ModelUnavailableError, match="no-such-model"):
        _ = reference.loaded
    _, hub_reference = wrap_vlm_for_rl("some-org/some-vlm", AeroRLConfig(), device="cpu")
    with pytest.raises(ModelUnavailableError, match="some-org/some-vlm.*(download|cache)"):
        _ = hub_reference.loaded
