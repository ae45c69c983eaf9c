"""Runtimes built from one ``TrainingSettings``: described without loading, failing clearly on use;
and the library under ``rl`` never sees AeroRL's facade."""


import pytest

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.models.loading import ModelUnavailableError
from aerorl_ops.rl.runtime.policy import LoraBaseReference, policy_and_reference, reference_mode


def test_runtimes_describe_without_loading_and_fail_clearly_on_use(tmp_path):
    missing = str(tmp_path / "no-such-model")
    policy, reference = policy_and_reference(missing, TrainingSettings(quant_bits=4), device="cpu")
    assert reference.quantization_mode == "bitsandbytes-nf4"
    assert reference.as_dict()["precision"] == "nf4"
    assert policy.as_dict() == {"model_name_or_path": missing, "runtime": "trainable", "device": "cpu"}
    with pytest.raises(ModelUnavailableError, match="no-such-model"):
        _ = reference.loaded
    _, hub_reference = policy_and_reference("some-org/some-vlm", TrainingSettings(), device="cpu")
    with pytest.raises(ModelUnavailableError, match="some-org/some-vlm.*(download|cache)"):
        _ = hub_reference.loaded


def test_the_reference_follows_the_settings():
    assert [reference_mode(TrainingSettings(quant_bits=bits)) for bits in (4, 8, 16)] == [
        "bitsandbytes-nf4", "bitsandbytes-int8", "unquantized"]
    settings = TrainingSettings(lora_rank=4, reference="lora_base")
    _, reference = policy_and_reference("some-org/some-vlm", settings, device="cpu")
    assert isinstance(reference, LoraBaseReference) and reference_mode(settings) == "lora-base-adapters-disabled"


def test_the_policy_and_reference_load_in_the_base_models_dtype(tiny_model_dir):
    """A ``[models.<key>] dtype = "bfloat16"`` base model trains in bf16 (a 3B policy then fits beside its
    int8 reference on a 24 GiB machine; benchmarks/bench_real_shapes.py); a checkpoint folder is float32."""
    import torch

    from aerorl_ops.config.benchmark import parse_benchmark_config
    from aerorl_ops.rl.run.inputs import base_model_dtype

    bench = parse_benchmark_config({"benchmark": {"batch_sizes": [1]},
                                    "models": {"half": {"source": str(tiny_model_dir), "dtype": "bfloat16"}}})
    assert base_model_dtype("half", bench) == torch.bfloat16
    assert base_model_dtype(str(tiny_model_dir), bench) == torch.float32
    settings = TrainingSettings(lora_rank=4, quant_bits=8)
    policy, reference = policy_and_reference(str(tiny_model_dir), settings, device="cpu", dtype=torch.bfloat16)
    model = policy.loaded.model
    frozen = {p.dtype for p in model.parameters() if not p.requires_grad}
    assert frozen == {torch.bfloat16}
    unquantized = {p.dtype for n, p in reference.loaded.model.named_parameters() if p.dtype.is_floating_point}
    assert torch.bfloat16 in unquantized and torch.float32 not in unquantized
