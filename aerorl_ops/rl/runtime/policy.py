"""Policy and frozen reference runtimes: real models, loaded lazily on first use.

:func:`policy_and_reference` builds both from one ``TrainingSettings`` (AeroRL's
``wrap_vlm_for_rl`` is a facade over it, ``aerorl_ops.aerorl``). Both hold real models: the policy
trains, and the reference is loaded through bitsandbytes (int8, or nf4 for 4 bits; unquantized for 16;
a layer whose input the kernels refuse stays in full precision: ``rl.runtime.reference_quantization``), put in
``.eval()`` with gradients off, and run under ``torch.inference_mode()``.

The policy is prepared as configured when it loads: LoRA adapters (``rl.runtime.lora``; a folder's saved
adapter is continued) and a frozen vision tower (``rl.runtime.vision_tower``), both on the vision parts
traced from the model before any adapter wraps it (``LoadedVLM.vision``). With ``reference =
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
from torch.distributed.fsdp import FSDPModule

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.models.entry import DECODE_AUTO, GenerationBackend
from aerorl_ops.models.family_parts import FamilyParts
from aerorl_ops.models.loading import LoadedVLM, ModelSource, load_vlm, resolve_device
from aerorl_ops.rl.runtime.lora import load_lora
from aerorl_ops.rl.runtime.reference_quantization import (
    ReferenceQuantization,
    load_quantized_reference,
    unquantized_linears,
)
from aerorl_ops.rl.runtime.vision_tower import freeze_vision_parts

REFERENCE_QUANTIZATIONS = {
    8: ReferenceQuantization("bitsandbytes-int8", "int8", "bitsandbytes"),
    4: ReferenceQuantization("bitsandbytes-nf4", "nf4", "bitsandbytes"),
    16: ReferenceQuantization("unquantized", "fp32", "torch"),
}
"""By ``quant_bits``."""
LORA_BASE_MODE = "lora-base-adapters-disabled"


def reference_mode(settings: TrainingSettings) -> str:
    """How the reference is held, as recorded with a run."""
    return LORA_BASE_MODE if settings.reference == "lora_base" else REFERENCE_QUANTIZATIONS[settings.quant_bits].mode


@dataclass
class PolicyRuntime:
    """The trainable policy. ``.loaded`` loads it on first use, in train mode, with LoRA adapters and a
    frozen vision tower as configured (only then do parameters keep gradients)."""

    model_name_or_path: str
    settings: TrainingSettings
    source: ModelSource
    device: torch.device
    dtype: torch.dtype = torch.float32  # the base model's [models.<key>] dtype (LoRA adapters stay float32)
    runtime: str = "trainable"
    _loaded: LoadedVLM | None = field(default=None, repr=False)

    @property
    def is_loaded(self) -> bool:
        """Whether the model has loaded (or, for the LoRA base, scored): nothing loads before first use."""
        return self._loaded is not None

    @property
    def loaded(self) -> LoadedVLM:
        if self._loaded is None:
            loaded = load_vlm(self.source, self.device, dtype=self.dtype)
            folder = self.source.location if self.source.is_local else None
            loaded.model = trainable(loaded.model, folder, self.settings, loaded.vision.parts)
            self._loaded = loaded
        return self._loaded

    def as_dict(self) -> dict[str, object]:
        return {"model_name_or_path": self.model_name_or_path, "runtime": self.runtime, "device": str(self.device)}


@dataclass
class ReferenceRuntime:
    """The frozen reference: quantized as configured, eval mode, no gradients. Once a quantized one has
    loaded, ``unquantized`` names its linear layers in full precision (None before, or unquantized)."""

    model_name_or_path: str
    quantization: ReferenceQuantization
    source: ModelSource
    device: torch.device
    dtype: torch.dtype = torch.float32  # of the parts a quantization leaves as they are
    runtime: str = "reference"
    _loaded: LoadedVLM | None = field(default=None, repr=False)
    unquantized: tuple[str, ...] | None = None

    @property
    def is_loaded(self) -> bool:
        """Whether the model has loaded (or, for the LoRA base, scored): nothing loads before first use."""
        return self._loaded is not None

    @property
    def quantization_mode(self) -> str:
        return self.quantization.mode

    @property
    def loaded(self) -> LoadedVLM:
        if self._loaded is None:
            loaded = load_quantized_reference(self.source, self.device, self.dtype, self.quantization)
            loaded.model.eval()
            loaded.model.requires_grad_(False)
            if self.quantization.backend == "bitsandbytes":
                self.unquantized = unquantized_linears(loaded.model)
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
                "backend": self.quantization.backend, "unquantized_layers": self.unquantized}


@dataclass
class LoraBaseReference:
    """The reference as the LoRA policy's own base weights: ``PeftModel.disable_adapter()``, no copy.

    ``anchor`` at the RL start merges the warm-up adapter into the base weights (peft's
    ``merge_and_unload``, the same sum as the saved warm-up checkpoint) and attaches fresh adapters
    (zero delta: the policy is unchanged), so "adapters disabled" is the RL start model; the policy is
    a new module then, and the trainer builds a new optimizer for it (the warm-up's optimizer
    state does not carry over in this mode). A run resumed mid-RL loads its checkpoint's adapter,
    whose base is already the RL start model, and is not re-based. A sharded policy (``rl.runtime.sharding``)
    cannot merge in place: it loads that sum, the RL start checkpoint, instead.
    """

    model_name_or_path: str
    policy: PolicyRuntime
    runtime: str = "reference"
    _loaded: LoadedVLM | None = field(default=None, repr=False)  # the policy, once it has scored as the reference

    @property
    def is_loaded(self) -> bool:
        """Whether the model has loaded (or, for the LoRA base, scored): nothing loads before first use."""
        return self._loaded is not None

    @property
    def device(self) -> torch.device:
        return self.policy.device

    @property
    def quantization_mode(self) -> str:
        return LORA_BASE_MODE

    @property
    def unquantized(self) -> None:
        """Nothing is quantized: the policy's own weights."""
        return None

    def anchor(self, location: str, rl_start: bool) -> None:
        """The RL start model is ``location``; at the RL start, re-base the policy's adapters onto it."""
        self.model_name_or_path = location
        if rl_start:
            loaded = self.policy.loaded
            merged = (loaded.model.merge_and_unload() if not isinstance(loaded.model.get_base_model(), FSDPModule)
                      else load_vlm(replace(self.policy.source, location=location, local_files_only=True),
                                    self.policy.device, dtype=self.policy.dtype).model)  # sharded: its saved merge
            loaded.model = trainable(merged, None, self.policy.settings, loaded.vision.parts)

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


def trainable(model: torch.nn.Module, folder: str | None, settings: TrainingSettings,
              parts: FamilyParts) -> torch.nn.Module:
    """``model`` prepared to train: LoRA adapters (``folder``'s saved one, else fresh; none on the vision
    ``parts``) when ``lora_rank > 0``, the vision tower frozen when asked, train mode."""
    if settings.lora_rank:
        model = load_lora(model, folder, settings, parts)
    freeze_vision_parts(model, settings, parts)
    return model.train()


def policy_and_reference(model_name_or_path: str, settings: TrainingSettings, device: str = "auto",
                         local_files_only: bool = True, trust_remote_code: bool = False,
                         dtype: torch.dtype = torch.float32, chat_template: str = "", decode: str = DECODE_AUTO,
                         ) -> tuple[PolicyRuntime, ReferenceRuntime | LoraBaseReference]:
    """A trainable policy and a frozen reference of the same checkpoint, both in ``dtype`` (the base
    model's ``[models.<key>]`` dtype): the reference quantized at ``quant_bits``, or the LoRA policy's base
    (``settings.reference``). ``chat_template``: the base model's ``[models.<key>]`` one (empty: the
    checkpoint's own; ``models.prompt_template``); the policy's processor holds it, so checkpoints saved
    from it carry it. ``decode``: how the policy decodes its rollouts and evaluations (``generation.decode``).
    Nothing loads until a runtime's ``.loaded`` is used."""
    source = ModelSource(model_name_or_path, trust_remote_code=trust_remote_code, local_files_only=local_files_only,
                         chat_template=chat_template, backend=GenerationBackend(decode=decode))
    torch_device = resolve_device(device)
    policy = PolicyRuntime(model_name_or_path, settings, source, torch_device, dtype)
    if settings.reference == "lora_base":
        return policy, LoraBaseReference(model_name_or_path, policy)
    return policy, ReferenceRuntime(model_name_or_path, REFERENCE_QUANTIZATIONS[settings.quant_bits], source,
                                    torch_device, dtype)
