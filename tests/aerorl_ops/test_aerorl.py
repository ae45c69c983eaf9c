"""AeroRL's public API, a facade in front of the trainer: its README's quickstart runs verbatim
(``aerorl`` -> ``aerorl_ops``, the model id -> the embedded tiny Qwen2-VL), ``AeroRLConfig`` builds a
checked ``TrainingSettings``, and wrapping loads nothing."""

import contextlib
import io

import pytest
import torch

import aerorl_ops
from aerorl_ops.aerorl import AeroRLConfig, AeroRLTrainer, create_quantized_reference_runtime, wrap_vlm_for_rl
from aerorl_ops.config.fields import ConfigError
from aerorl_ops.config.training import TrainingSettings

QUICKSTART = '''
import torch
from aerorl import AeroRLConfig, AeroRLTrainer, wrap_vlm_for_rl

cfg = AeroRLConfig(trainer_backend="auto", quant_ref_bits=8, mask_vision_tokens=True)
train_runtime, ref_runtime = wrap_vlm_for_rl("Qwen/Qwen2.5-VL-7B-Instruct", cfg)

trainer = AeroRLTrainer(cfg)
trainer.on_train_start()

logits = torch.randn(2, 4, 8, requires_grad=True)
labels = torch.tensor([[1, 2, 3, 4], [2, 3, 4, 5]])
vision_mask = torch.tensor([[True, False, False, True], [False, False, True, False]])

step_result = trainer.train_step(logits=logits, labels=labels, vision_mask=vision_mask)

print(train_runtime["trainer"])
print(ref_runtime["quantization_mode"])
print(step_result)
print(trainer.on_train_end())
'''
"""AeroRL's README "2-Minute Example", verbatim."""


def test_the_quickstart_runs_verbatim_on_the_tiny_model(tiny_model_dir):
    source = QUICKSTART.replace("from aerorl import", "from aerorl_ops import").replace(
        "Qwen/Qwen2.5-VL-7B-Instruct", str(tiny_model_dir))
    scope: dict = {}
    torch.manual_seed(0)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        exec(compile(source, "aerorl_quickstart", "exec"), scope)  # noqa: S102 - the README's own code
    lines = out.getvalue().splitlines()
    assert lines[0] == str({"backend": "torch", "available": True, "reason": "aerorl_ops native torch trainer"})
    assert lines[1] == "bitsandbytes-int8"
    step = scope["step_result"]
    assert (step["step"], step["backend"]) == (1, "torch") and lines[2] == str(step)
    # 5 text positions of 8 counted; the loss is their mean NLL
    logits, labels, vision = scope["logits"], scope["labels"], scope["vision_mask"]
    nll = -torch.log_softmax(logits.detach(), -1).gather(-1, labels[..., None])[..., 0]  # [2, 4]
    assert step["loss"] == pytest.approx(float(nll[~vision].mean()), rel=1e-6)
    assert logits.grad[vision].abs().sum() == 0  # vision positions got no gradient
    assert lines[3] == str({"status": "finished", "steps": 1, "backend": "torch"})
    assert scope["train_runtime"]._loaded is None and scope["ref_runtime"]._loaded is None  # wrapping loads nothing


def test_the_public_names_import_from_the_package():
    names = ("AeroRLConfig", "AeroRLTrainer", "wrap_vlm_for_rl", "masked_cross_entropy_loss",
             "create_quantized_reference_runtime", "build_default_reward_stack", "build_reward_stack",
             "evaluate_records")
    assert all(callable(getattr(aerorl_ops, name)) for name in names)
    assert aerorl_ops.AeroRLTrainer is AeroRLTrainer and set(names) <= set(dir(aerorl_ops))


def test_the_config_builds_checked_settings_and_the_trainer_only_sees_them():
    config = AeroRLConfig(quant_ref_bits=4, training={"algorithm": "rloo", "group_size": 4})
    settings = config.settings()
    assert isinstance(settings, TrainingSettings)
    assert (settings.quant_bits, settings.algorithm, settings.group_size, settings.learning_rate) == (
        4, "rloo", 4, TrainingSettings().learning_rate)
    trainer = AeroRLTrainer(config)
    assert trainer.trainer.settings == settings.resolve()  # the algorithm's defaults for what is unset


@pytest.mark.parametrize(("config", "message"), [
    (AeroRLConfig(quant_ref_bits=3), "AeroRLConfig: setting 'quant_ref_bits' must be 4 (nf4), 8 (int8) or 16, got 3"),
    (AeroRLConfig(trainer_backend="deepspeed"), "AeroRLConfig: trainer_backend must be one of"),
    (AeroRLConfig(training={"kl_coef": -0.1}), "AeroRLConfig: setting \"training['kl_coef']\" must be >= 0"),
    (AeroRLConfig(training={"group_size": 1}), "AeroRLConfig: group_size must be >= 2 for grpo"),
    (AeroRLConfig(training={"no_such": 1}), "AeroRLConfig: setting 'training' has unknown keys ['no_such']"),
])
def test_a_bad_config_names_its_field(config, message):
    with pytest.raises(ConfigError, match="^AeroRLConfig: ") as raised:
        config.settings()
    assert message in str(raised.value)


def test_mask_vision_tokens_off_counts_every_token():
    logits = torch.zeros(1, 3, 4, requires_grad=True)  # uniform: every counted token costs log 4
    labels, vision = torch.tensor([[1, 2, 3]]), torch.tensor([[True, False, False]])
    trainer = AeroRLTrainer(AeroRLConfig(mask_vision_tokens=False))
    assert trainer.train_step(logits=logits, labels=labels, vision_mask=vision)["loss"] == pytest.approx(
        torch.log(torch.tensor(4.0)).item(), rel=1e-6)
    assert logits.grad[0, 0].abs().sum() > 0  # the vision position counted


def test_runtimes_read_as_dicts_and_load_lazily(tmp_path):
    missing = str(tmp_path / "no-such-model")
    policy, reference = wrap_vlm_for_rl(missing, AeroRLConfig(quant_ref_bits=16), device="cpu")
    assert policy["trainer"]["backend"] == "torch" and policy["runtime"] == "trainable"
    assert (reference["quantization_mode"], reference["precision"]) == ("unquantized", "fp32")
    alone = create_quantized_reference_runtime(missing, quant_ref_bits=4, device="cpu")
    assert alone["quantization_mode"] == "bitsandbytes-nf4"
    with pytest.raises(ConfigError, match="quant_ref_bits must be 4 .nf4., 8 .int8. or 16, got 2"):
        create_quantized_reference_runtime(missing, quant_ref_bits=2)
