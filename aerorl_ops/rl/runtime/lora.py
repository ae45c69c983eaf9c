"""LoRA adapters on the policy, through ``peft`` (verl's ``lora_rank`` / ``lora_alpha`` / ``target_modules``).

A LoRA layer computes ``y = W·x + (alpha / r)·B·A·x`` with ``A [r, in]`` (Kaiming-uniform at
init) and ``B [out, r]`` (zeros at init, so a fresh adapter leaves the model unchanged); only
``A`` and ``B`` train. verl's defaults: ``lora_alpha = 16`` whatever the rank (the scale is then
``16 / r``), ``target_modules = "all-linear"``, no bias, no dropout.

Never adapted: the vision encoder and the projector (``LoadedVLM.vision.parts``, traced from the model; verl's VLM
recipe excludes the tower too), the LM head (the fused log-prob path reads its weight directly) and a
``Linear`` subclass with a forward of its own (Llama 4's MoE router), which a LoRA layer cannot wrap.
They are excluded through peft's ``exclude_modules`` regex, so a target list that names their layers
cannot reach them; as every base weight under LoRA, they do not train.

Checkpoints (``save_policy``): a LoRA policy is saved **merged**, ``W + (alpha/r)·B·A`` in
place of each adapted weight, so the folder loads with a plain ``from_pretrained`` and is
benchmarked as any model; the adapter itself goes to ``<dir>/adapter`` (peft's format).

Loading a folder that has ``adapter/`` (a resume, the supervised control, a run started from a
LoRA checkpoint) continues that adapter: the merged weights are loaded, the adapter attached,
and its delta subtracted, ``W = merged − (alpha/r)·B·A``. The adapter and its optimizer state
come back exactly; the base weights equal the saved run's up to float rounding (one ulp).
"""

from __future__ import annotations

import re
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from peft.tuners.lora import Linear as LoraLinear
from peft.tuners.lora import LoraLayer
from peft.utils.other import transpose

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.models.family_parts import FamilyParts, vision_module_names

ADAPTER_DIR = "adapter"
ADAPTER = "default"  # peft's name of the one adapter


def lora_config(model: torch.nn.Module, settings: TrainingSettings, parts: FamilyParts) -> LoraConfig:
    """The settings' ``LoraConfig``, the vision encoder and projector (``parts``) and the LM head excluded, and
    every ``Linear`` subclass with a forward of its own, which peft's LoRA layer cannot wrap (Llama 4's MoE
    router returns its scores and logits)."""
    excluded = [re.escape(name) + r"(\..*)?" for name in vision_module_names(model, parts)]
    head = model.get_output_embeddings()
    excluded += [re.escape(name) for name, module in model.named_modules()
                 if module is head or (isinstance(module, torch.nn.Linear)
                                       and type(module).forward is not torch.nn.Linear.forward)]
    targets = settings.lora_target_modules.strip()
    return LoraConfig(r=settings.lora_rank, lora_alpha=settings.lora_alpha, lora_dropout=settings.lora_dropout,
                      target_modules=targets if targets == "all-linear" else [t.strip() for t in targets.split(",")],
                      exclude_modules="|".join(excluded) or None, bias="none")


def attach_lora(model: torch.nn.Module, settings: TrainingSettings, parts: FamilyParts) -> PeftModel:
    """Fresh adapters on ``model`` (its own parameters frozen), none on its vision ``parts``. Their init is
    seeded by ``settings.seed`` without touching the global generators."""
    with torch.random.fork_rng(), _peft_calls():
        torch.manual_seed(settings.seed)
        try:
            return get_peft_model(model, lora_config(model, settings, parts))
        except ValueError as error:
            raise ValueError(f"lora_target_modules={settings.lora_target_modules!r}: {error}") from None


def load_lora(model: torch.nn.Module, folder: str | Path | None, settings: TrainingSettings,
              parts: FamilyParts) -> PeftModel:
    """``folder``'s saved adapter on its un-merged base when it has one, else fresh adapters (none on the
    vision ``parts``)."""
    saved = Path(folder) / ADAPTER_DIR if folder is not None else None
    if saved is None or not saved.is_dir():
        return attach_lora(model, settings, parts)
    with _peft_calls():
        peft_model = PeftModel.from_pretrained(model, saved, is_trainable=True)
    stored = peft_model.peft_config[ADAPTER]
    if (stored.r, stored.lora_alpha) != (settings.lora_rank, settings.lora_alpha):
        raise ValueError(f"{saved} holds a LoRA adapter of rank {stored.r} / alpha {stored.lora_alpha}, but "
                         f"the settings lora_rank / lora_alpha are {settings.lora_rank} / {settings.lora_alpha}; use "
                         "the checkpoint's values, or start from another folder")
    with torch.no_grad():
        for _, layer in lora_layers(peft_model):
            layer.get_base_layer().weight -= layer.get_delta_weight(ADAPTER)
    return peft_model


def merged_state_dict(model: PeftModel, gathered: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """The plain model's state dict (its own key names), each adapted weight as ``W + (alpha/r)·B·A``
    (the same in-place add as peft's merge, so a merged policy and this export agree bit for bit).
    ``gathered``: the whole ``model.state_dict()``, gathered from a sharded policy (``rl.runtime.sharding``)."""
    base = model.get_base_model()
    layers = dict(lora_layers(base))
    prefix = "base_model.model."  # a peft model's keys, over its base model's
    state = base.state_dict() if gathered is None else {k.removeprefix(prefix): v for k, v in gathered.items()}
    merged = {}
    with torch.no_grad():
        for key, value in state.items():
            owner, _, leaf = key.rpartition(".")
            if any(part.startswith("lora_") for part in owner.split(".")):
                continue
            if owner.endswith(".base_layer"):
                owner = owner.removesuffix(".base_layer")
                key = f"{owner}.{leaf}"
                if leaf == "weight":
                    delta = (layers[owner].get_delta_weight(ADAPTER) if gathered is None
                             else _gathered_delta(layers[owner], state, owner))
                    value = value.clone().add_(delta).cpu()
            merged[key] = value
    return merged


def _gathered_delta(layer: LoraLayer, state: dict[str, torch.Tensor], owner: str) -> torch.Tensor:
    """peft's ``Linear.get_delta_weight`` on the gathered adapter weights of ``owner``: (alpha/r)·B·A."""
    if not isinstance(layer, LoraLinear):
        raise TypeError(f"{owner}: a sharded LoRA policy merges Linear adapters only, got {type(layer).__name__}")
    a, b = state[f"{owner}.lora_A.{ADAPTER}.weight"], state[f"{owner}.lora_B.{ADAPTER}.weight"]
    return (transpose(b.float() @ a.float(), layer.fan_in_fan_out) * layer.scaling[ADAPTER]).to(b.dtype)


def save_policy(model: torch.nn.Module, directory: Path, gathered: dict[str, torch.Tensor] | None = None) -> None:
    """``save_pretrained`` of the plain model; a LoRA policy merged, its adapter in ``adapter/``.
    ``gathered``: the whole ``model.state_dict()`` of a sharded policy (``rl.runtime.sharding``), gathered."""
    adapter = Path(directory) / ADAPTER_DIR
    if isinstance(model, PeftModel):
        model.get_base_model().save_pretrained(directory, state_dict=merged_state_dict(model, gathered))
        model.save_pretrained(adapter, **({} if gathered is None else {"state_dict": gathered}))
    else:
        model.save_pretrained(directory, **({} if gathered is None else {"state_dict": gathered}))
        if adapter.is_dir():  # a stale adapter would be resumed on top of these full weights
            shutil.rmtree(adapter)


def lora_layers(model: torch.nn.Module) -> Iterator[tuple[str, LoraLayer]]:
    return ((name, module) for name, module in model.named_modules() if isinstance(module, LoraLayer))


@contextmanager
def _peft_calls() -> Iterator[None]:
    """peft reads transformers' deprecated ``is_gradient_checkpointing``; its warning is not ours to fix."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        yield
