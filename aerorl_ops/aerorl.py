"""AeroRL's public API (github sabdulmajid/aeroRL) as a facade in front of this project's trainer.

AeroRL users write what its README shows::

    cfg = AeroRLConfig(trainer_backend="auto", quant_ref_bits=8, mask_vision_tokens=True)
    train_runtime, ref_runtime = wrap_vlm_for_rl("path/to/vlm", cfg)
    trainer = AeroRLTrainer(cfg)
    trainer.on_train_start()
    trainer.train_step(logits=logits, labels=labels, vision_mask=vision_mask)
    trainer.on_train_end()

Behind it, :meth:`AeroRLConfig.settings` builds one checked ``TrainingSettings`` (``quant_ref_bits``
is the setting ``quant_bits``; any other setting goes in ``training``), and the real machinery
(``rl.runtime.policy.policy_and_reference``, ``rl.step.trainer.RLTrainer``) only ever sees that. What is
AeroRL's alone stays here:

- ``trainer_backend`` (``TRAINER_BACKENDS``): ``auto`` and ``torch`` run this project's torch
  trainer; ``trl`` / ``verl`` are accepted and reported (with whether they are installed), but the
  steps still run on the torch trainer;
- ``mask_vision_tokens``: whether the tensor-only ``train_step`` leaves vision tokens out of its loss;
- ``zero_copy_kv``: AeroRL's descriptive flag; it changes nothing here;
- runtimes read as dicts (``train_runtime["trainer"]``, ``ref_runtime["quantization_mode"]``).

Nothing loads a model until a runtime's ``.loaded`` is used. AeroRL's reward defaults
(``aerorl_compat.AERORL_REWARDS``) are the reward builders' and the replay CLI's.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from aerorl_ops.config.fields import ConfigError, checked
from aerorl_ops.config.training import TRAINING_DEFAULTS, TrainingSettings
from aerorl_ops.losses import masked_cross_entropy_loss
from aerorl_ops.models.loading import ModelSource, resolve_device
from aerorl_ops.rl.runtime.policy import REFERENCE_QUANTIZATIONS, ReferenceRuntime, policy_and_reference
from aerorl_ops.rl.step.trainer import RLTrainer

TRAINER_BACKENDS = ("auto", "torch", "trl", "verl")
WHERE = "AeroRLConfig"


@dataclass(frozen=True, slots=True)
class TrainerAdapter:
    """Which trainer backend runs the RL steps (descriptive fields AeroRL users read)."""

    backend: str
    available: bool
    reason: str

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def resolve_trainer_backend(preferred: str = "auto") -> TrainerAdapter:
    """``auto``/``torch``: this project's torch trainer, always available. ``trl``/``verl`` are
    reported with whether they are installed; the steps still run on the torch trainer."""
    if preferred not in TRAINER_BACKENDS:
        raise ConfigError(f"{WHERE}: trainer_backend must be one of {TRAINER_BACKENDS}, got {preferred!r}")
    if preferred in ("auto", "torch"):
        return TrainerAdapter("torch", True, "aerorl_ops native torch trainer")
    installed = importlib.util.find_spec(preferred) is not None
    state = "installed" if installed else "not installed"
    return TrainerAdapter(preferred, installed, f"{preferred} {state}; steps run on the torch trainer")


@dataclass(frozen=True)
class AeroRLConfig:
    """AeroRL's config: its own fields, and ``training``, any other ``TrainingSettings`` field by name
    (``{"algorithm": "rloo", "group_size": 4}``); every other setting is the pipeline's default."""

    trainer_backend: str = "auto"
    quant_ref_bits: int = TRAINING_DEFAULTS.quant_bits
    mask_vision_tokens: bool = True
    zero_copy_kv: bool = True
    training: Mapping[str, Any] = field(default_factory=dict)

    def settings(self) -> TrainingSettings:
        """The checked ``TrainingSettings`` of this config: ``ConfigError`` names the first bad field
        (``quant_ref_bits`` by its AeroRL name) or the broken rule across settings."""
        resolve_trainer_backend(self.trainer_backend)
        if "quant_bits" in self.training:
            raise ConfigError(f"{WHERE}: set quant_ref_bits, not training['quant_bits']")
        values = {**asdict(TRAINING_DEFAULTS), **self.training, "quant_bits": self.quant_ref_bits}
        named = {"quant_bits": "quant_ref_bits"}
        return checked(TrainingSettings, WHERE, "training", values,
                       named=lambda name: named.get(name, f"training[{name!r}]")).check_rules(WHERE)


class AeroRLRuntime:
    """A runtime AeroRL users read as a dict (``runtime["trainer"]``); attributes are the real
    runtime's (``.loaded`` loads the model on first use)."""

    def __init__(self, runtime: Any, described: Mapping[str, object] | None = None) -> None:
        self.runtime = runtime
        self.described = dict(described or {})

    def as_dict(self) -> dict[str, object]:
        return {**self.runtime.as_dict(), **self.described}

    def __getitem__(self, key: str) -> object:
        return self.as_dict()[key]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.runtime, name)


def wrap_vlm_for_rl(model_name_or_path: str, config: AeroRLConfig, device: str = "auto",
                    local_files_only: bool = True,
                    trust_remote_code: bool = False) -> tuple[AeroRLRuntime, AeroRLRuntime]:
    """AeroRL's (policy, reference) of one checkpoint; the reference quantized at ``quant_ref_bits``
    (or the LoRA policy's base, with ``training={"reference": "lora_base", ...}``). Loads nothing."""
    policy, reference = policy_and_reference(model_name_or_path, config.settings(), device, local_files_only,
                                             trust_remote_code)
    trainer = resolve_trainer_backend(config.trainer_backend).as_dict()
    return AeroRLRuntime(policy, {"trainer": trainer}), AeroRLRuntime(reference)


def create_quantized_reference_runtime(model_name_or_path: str, quant_ref_bits: int = TRAINING_DEFAULTS.quant_bits,
                                       device: str = "auto", local_files_only: bool = True,
                                       trust_remote_code: bool = False) -> AeroRLRuntime:
    """AeroRL's frozen reference alone, at ``quant_ref_bits`` (4, 8 or 16). Loads nothing."""
    if quant_ref_bits not in REFERENCE_QUANTIZATIONS:
        raise ConfigError(f"{WHERE}: quant_ref_bits must be 4 (nf4), 8 (int8) or 16, got {quant_ref_bits!r}")
    source = ModelSource(model_name_or_path, trust_remote_code=trust_remote_code, local_files_only=local_files_only)
    return AeroRLRuntime(ReferenceRuntime(model_name_or_path, REFERENCE_QUANTIZATIONS[quant_ref_bits], source,
                                          resolve_device(device)))


class AeroRLTrainer:
    """AeroRL's trainer: its lifecycle and tensor-only ``train_step``. ``trainer`` is the real
    ``RLTrainer`` of ``config.settings().resolve()`` (its ``supervised_step`` / ``rl_step`` need ``policy``)."""

    def __init__(self, config: AeroRLConfig, policy: AeroRLRuntime | None = None,
                 reference: AeroRLRuntime | None = None) -> None:
        self.config = config
        self.adapter = resolve_trainer_backend(config.trainer_backend)
        self.trainer = RLTrainer(config.settings().resolve(), _real(policy), _real(reference))
        self.tensor_steps = 0

    def on_train_start(self) -> dict[str, Any]:
        return {"status": "started", "backend": self.adapter.backend, "backend_available": self.adapter.available}

    def on_train_end(self) -> dict[str, Any]:
        """Shuts a vLLM rollout engine down, if one started; the steps taken (tensor-only and real)."""
        self.trainer.close_rollouts()
        return {"status": "finished", "steps": self.tensor_steps + self.trainer.state.step,
                "backend": self.adapter.backend}

    def compute_masked_loss(self, logits: torch.Tensor, labels: torch.Tensor,
                            vision_mask: torch.Tensor) -> torch.Tensor:
        """Mean NLL over text tokens (``losses.masked_cross_entropy_loss``); with ``mask_vision_tokens``
        off, vision tokens count too. logits: [B, T, V]; labels, vision_mask: [B, T]."""
        if not self.config.mask_vision_tokens:
            vision_mask = torch.zeros_like(vision_mask, dtype=torch.bool)  # [B, T]
        return masked_cross_entropy_loss(logits=logits, labels=labels, vision_mask=vision_mask)

    def train_step(self, logits: torch.Tensor, labels: torch.Tensor, vision_mask: torch.Tensor,
                   optimizer: torch.optim.Optimizer | None = None) -> dict[str, Any]:
        """Backward of the masked loss (and ``optimizer``'s step when given): AeroRL's quickstart step."""
        loss = self.compute_masked_loss(logits, labels, vision_mask)
        loss.backward()
        if optimizer is not None:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        self.tensor_steps += 1
        return {"step": self.tensor_steps, "loss": float(loss.detach()), "backend": self.adapter.backend}


def _real(runtime: AeroRLRuntime | Any | None) -> Any:
    return runtime.runtime if isinstance(runtime, AeroRLRuntime) else runtime
