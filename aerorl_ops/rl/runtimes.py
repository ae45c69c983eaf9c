"""Policy and frozen reference runtimes: real models, loaded lazily on first use.

``wrap_vlm_for_rl`` keeps AeroRL's shape (it returns a policy and a reference description with
``trainer`` and ``quantization_mode``), but both runtimes hold real models: the policy trains,
and the reference is loaded through bitsandbytes (int8, or nf4 for 4 bits; unquantized for 16),
put in ``.eval()`` with gradients off, and run under ``torch.inference_mode()``.

Describing a runtime never touches the disk; the first use of ``.loaded`` loads the model, and
a model that is not on this machine fails there with a message that names it and says how to
make it available offline.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers import BitsAndBytesConfig

from aerorl_ops.aerorl_compat import TrainerAdapter, resolve_trainer_backend
from aerorl_ops.models.loading import LoadedVLM, ModelSource, load_vlm, resolve_device
from aerorl_ops.rl.config import AeroRLConfig


@dataclass(frozen=True, slots=True)
class ReferenceQuantization:
    """How the reference is stored: the AeroRL-style mode label and the transformers config."""

    bits: int
    mode: str
    precision: str
    backend: str

    def transformers_config(self) -> BitsAndBytesConfig | None:
        if self.bits == 8:
            return BitsAndBytesConfig(load_in_8bit=True)
        if self.bits == 4:
            return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                      bnb_4bit_compute_dtype=torch.float32)
        return None


REFERENCE_QUANTIZATIONS = {
    8: ReferenceQuantization(8, "bitsandbytes-int8", "int8", "bitsandbytes"),
    4: ReferenceQuantization(4, "bitsandbytes-nf4", "nf4", "bitsandbytes"),
    16: ReferenceQuantization(16, "unquantized", "fp32", "torch"),
}


@dataclass
class PolicyRuntime:
    """The trainable policy. ``.loaded`` loads it (train mode, gradients on) on first use."""

    model_name_or_path: str
    config: AeroRLConfig
    trainer: TrainerAdapter
    source: ModelSource
    device: torch.device
    runtime: str = "trainable"
    _loaded: LoadedVLM | None = field(default=None, repr=False)

    @property
    def loaded(self) -> LoadedVLM:
        if self._loaded is None:
            self._loaded = load_vlm(self.source, self.device)
            self._loaded.model.train()
        return self._loaded

    def as_dict(self) -> dict[str, object]:
        return {"model_name_or_path": self.model_name_or_path, "runtime": self.runtime,
                "trainer": self.trainer.as_dict(), "device": str(self.device)}


@dataclass
class ReferenceRuntime:
    """The frozen reference: quantized as configured, eval mode, no gradients."""

    model_name_or_path: str
    quantization: ReferenceQuantization
    source: ModelSource
    device: torch.device
    runtime: str = "reference"
    _loaded: LoadedVLM | None = field(default=None, repr=False)

    @property
    def quant_bits(self) -> int:
        return self.quantization.bits

    @property
    def quantization_mode(self) -> str:
        return self.quantization.mode

    @property
    def loaded(self) -> LoadedVLM:
        if self._loaded is None:
            loaded = load_vlm(self.source, self.device, quantization_config=self.quantization.transformers_config())
            loaded.model.eval()
            loaded.model.requires_grad_(False)
            self._loaded = loaded
        return self._loaded

    def as_dict(self) -> dict[str, object]:
        return {"model_name_or_path": self.model_name_or_path, "runtime": self.runtime,
                "precision": self.quantization.precision, "quantization_mode": self.quantization.mode,
                "backend": self.quantization.backend}


def wrap_vlm_for_rl(model_name_or_path: str, config: AeroRLConfig, device: str = "auto",
                    local_files_only: bool = True,
                    trust_remote_code: bool = False) -> tuple[PolicyRuntime, ReferenceRuntime]:
    """A trainable policy and a frozen (quantized) reference of the same checkpoint."""
    config.validate()
    source = ModelSource(model_name_or_path, trust_remote_code=trust_remote_code, local_files_only=local_files_only)
    torch_device = resolve_device(device)
    policy = PolicyRuntime(model_name_or_path, config, resolve_trainer_backend(config.trainer_backend), source,
                           torch_device)
    reference = ReferenceRuntime(model_name_or_path, REFERENCE_QUANTIZATIONS[config.quant_ref_bits], source,
                                 torch_device)
    return policy, reference
