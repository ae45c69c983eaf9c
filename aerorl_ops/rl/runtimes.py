"""Policy and frozen reference runtimes: real models, loaded lazily on first use.

``wrap_vlm_for_rl`` keeps AeroRL's shape (it returns a policy and a reference description with
``trainer`` and ``quantization_mode``), but both runtimes hold real models: the policy trains,
and the reference is loaded through bitsandbytes (int8, or nf4 for 4 bits; unquantized for 16),
put in ``.eval()`` with gradients off, and run under ``torch.inference_mode()``.

The policy is prepared as configured when it loads: LoRA adapters (``rl.lora``; a folder's saved
adapter is continued) and a frozen vision tower (``rl.vision_tower``). With ``reference =
"lora_base"`` the reference is :class:`LoraBaseReference`: the policy itself with its adapters
disabled, no second copy held.

Describing a runtime never touches the disk; the first use of ``.loaded`` loads the model, and
a model that is not on this machine fails there with a message that names it and says how to
make it available offline.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import torch
from transformers import BitsAndBytesConfig

from aerorl_ops.aerorl_compat import TrainerAdapter, resolve_trainer_backend
from aerorl_ops.models.loading import LoadedVLM, ModelSource, load_vlm, resolve_device
from aerorl_ops.rl.config import AeroRLConfig
from aerorl_ops.rl.lora import load_lora
from aerorl_ops.rl.vision_tower import freeze_vision_tower


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
LORA_BASE_MODE = "lora-base-adapters-disabled"


def reference_mode(config: AeroRLConfig) -> str:
    """How the reference is held, as recorded with a run."""
    return LORA_BASE_MODE if config.reference == "lora_base" else REFERENCE_QUANTIZATIONS[config.quant_ref_bits].mode


@dataclass
class PolicyRuntime:
    """The trainable policy. ``.loaded`` loads it on first use, in train mode, with LoRA adapters and a
    frozen vision tower as configured (only then do parameters keep gradients)."""

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
            loaded = load_vlm(self.source, self.device)
            folder = self.source.location if self.source.is_local else None
            loaded.model = trainable(loaded.model, folder, self.config)
            self._loaded = loaded
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

    def anchor(self, location: str, rl_start: bool) -> None:
        """Load (lazily) from ``location``, the model RL starts from (a copy: nothing to re-base at ``rl_start``)."""
        self.source = replace(self.source, location=location, local_files_only=True)
        self.model_name_or_path = location

    @contextmanager
    def scoring(self) -> Iterator[torch.nn.Module]:
        """The model that scores reference log-probs (the caller adds ``torch.inference_mode()``)."""
        yield self.loaded.model

    def as_dict(self) -> dict[str, object]:
        return {"model_name_or_path": self.model_name_or_path, "runtime": self.runtime,
                "precision": self.quantization.precision, "quantization_mode": self.quantization.mode,
                "backend": self.quantization.backend}


@dataclass
class LoraBaseReference:
    """The reference as the LoRA policy's own base weights: ``PeftModel.disable_adapter()``, no copy.

    ``anchor`` at the RL start merges the warm-up adapter into the base weights (peft's
    ``merge_and_unload``, the same sum as the saved warm-up checkpoint) and attaches fresh adapters
    (zero delta: the policy is unchanged), so "adapters disabled" is the RL start model; the policy is
    a new module then, and the trainer builds a new optimizer for it (the warm-up's optimizer
    state does not carry over in this mode). A run resumed mid-RL loads its checkpoint's adapter,
    whose base is already the RL start model, and is not re-based.
    """

    model_name_or_path: str
    policy: PolicyRuntime
    runtime: str = "reference"
    _loaded: LoadedVLM | None = field(default=None, repr=False)  # the policy, once it has scored as the reference

    @property
    def device(self) -> torch.device:
        return self.policy.device

    @property
    def quantization_mode(self) -> str:
        return LORA_BASE_MODE

    def anchor(self, location: str, rl_start: bool) -> None:
        """The RL start model is ``location``; at the RL start, re-base the policy's adapters onto it."""
        self.model_name_or_path = location
        if rl_start:
            loaded = self.policy.loaded
            loaded.model = trainable(loaded.model.merge_and_unload(), None, self.policy.config)

    @contextmanager
    def scoring(self) -> Iterator[torch.nn.Module]:
        """The policy in eval mode with its adapters disabled (the caller adds ``torch.inference_mode()``)."""
        loaded = self.policy.loaded
        model = loaded.model
        was_training = model.training
        model.eval()
        try:
            with model.disable_adapter():
                yield model
        finally:
            model.train(was_training)
        self._loaded = loaded

    def as_dict(self) -> dict[str, object]:
        return {"model_name_or_path": self.model_name_or_path, "runtime": self.runtime, "precision": "policy",
                "quantization_mode": LORA_BASE_MODE, "backend": "peft"}


def trainable(model: torch.nn.Module, folder: str | None, config: AeroRLConfig) -> torch.nn.Module:
    """``model`` prepared to train: LoRA adapters (``folder``'s saved one, else fresh) when
    ``lora_rank > 0``, the vision tower frozen when asked, train mode."""
    if config.lora_rank:
        model = load_lora(model, folder, config)
    if config.freeze_vision_tower:
        freeze_vision_tower(model)
    return model.train()


def wrap_vlm_for_rl(model_name_or_path: str, config: AeroRLConfig, device: str = "auto",
                    local_files_only: bool = True,
                    trust_remote_code: bool = False) -> tuple[PolicyRuntime, ReferenceRuntime | LoraBaseReference]:
    """A trainable policy and a frozen reference of the same checkpoint: quantized, or the LoRA policy's
    base (``config.reference``)."""
    config.validate()
    source = ModelSource(model_name_or_path, trust_remote_code=trust_remote_code, local_files_only=local_files_only)
    torch_device = resolve_device(device)
    policy = PolicyRuntime(model_name_or_path, config, resolve_trainer_backend(config.trainer_backend), source,
                           torch_device)
    if config.reference == "lora_base":
        return policy, LoraBaseReference(model_name_or_path, policy)
    reference = ReferenceRuntime(model_name_or_path, REFERENCE_QUANTIZATIONS[config.quant_ref_bits], source,
                                 torch_device)
    return policy, reference
