"""The policy's weights for an inference engine, one layer at a time, named as in its transformers checkpoint.

:func:`policy_weights` is lazy: it holds one layer's tensors at a time (:func:`layer_groups`), so what it
adds to memory is one layer, never a second copy of the model:

- a tensor the process holds whole is yielded as it is (detached, no copy);
- a sharded one (FSDP2's ``DTensor``) is gathered whole (``full_tensor()``, an all-gather every rank joins,
  in the same order on every rank) when its layer comes, and dropped once the consumer moves on;
- a peft (LoRA) model yields its base weights with each adapted layer's adapters merged in: a new tensor
  ``W + scaling x B @ A`` (peft's ``get_delta_weight``), the policy itself never changed.

transformers 5 renames some weights when it loads a checkpoint (Gemma 3's SigLIP tower drops
``vision_model.``); each layer's names are turned back as ``save_pretrained`` turns them, so an engine
reads the checkpoint's names.

    >>> [key for key, _ in layer_groups(["m.embed.weight", "m.layers.0.q.weight", "m.layers.0.k.weight",
    ...                                  "m.layers.1.q.weight", "m.norm.weight"])]
    ['m.embed', 'm.layers.0', 'm.layers.1', 'm.norm']
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import groupby

import torch
from torch.distributed.tensor import DTensor

PEFT_PREFIX = "base_model.model."
"""A peft model's state-dict names start with this before the base model's own."""
BASE_LAYER = ".base_layer."
"""An adapted layer's frozen base under peft: ``<layer>.base_layer.weight``."""


def layer_key(name: str) -> str:
    """The layer a tensor belongs to: its name up to the first numeric part (``...layers.3``), else its module.

    >>> layer_key("model.language_model.layers.3.mlp.up_proj.weight"), layer_key("lm_head.weight")
    ('model.language_model.layers.3', 'lm_head')
    """
    parts = name.split(".")
    numeric = next((i for i, part in enumerate(parts) if part.isdigit()), None)
    return ".".join(parts[:numeric + 1] if numeric is not None else parts[:-1])


def layer_groups(names: Iterable[str]) -> Iterator[tuple[str, list[str]]]:
    """``names`` (in the model's order) as runs that share a :func:`layer_key`."""
    for key, run in groupby(names, key=layer_key):
        yield key, list(run)


def whole(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` as this process can hand it on: a sharded ``DTensor`` gathered whole (every rank of its
    mesh must call this, in the same order), its shard moved to the mesh's device first when FSDP2 keeps it
    in host memory (``cpu_offload``); any other tensor detached, not copied."""
    if not isinstance(tensor, DTensor):
        return tensor.detach()
    mesh = tensor.device_mesh
    if tensor.to_local().device.type != mesh.device_type:
        tensor = DTensor.from_local(tensor.to_local().to(mesh.device_type), mesh, tensor.placements,
                                    run_check=False, shape=tensor.shape, stride=tensor.stride())
    return tensor.full_tensor().detach()


def policy_weights(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """``model``'s tensors under its checkpoint's names, one layer at a time (module docstring). A DDP
    wrapper (``.module``) is looked through."""
    model = getattr(model, "module", model)
    adapted = hasattr(model, "merge_adapter")
    base = model.get_base_model() if adapted else model
    state = model.state_dict()  # references (or shards), not copies
    for _, names in layer_groups(list(state)):
        layer = {name: whole(state[name]) for name in names}
        if adapted:
            layer = merged_layer(model, layer)
        yield from checkpoint_names(base, layer)
        del layer


def merged_layer(model: torch.nn.Module, layer: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """One layer of a peft model's state dict (whole tensors) as its base model's tensors, each adapted
    weight merged with the layer's active adapters (:func:`merged_weight`); the adapters' own tensors (and
    peft's ``modules_to_save`` copies) left out."""
    merged = {}
    for name, tensor in layer.items():
        if "lora_" in name or "modules_to_save" in name:
            continue
        if name.endswith(f"{BASE_LAYER}weight"):
            tensor = merged_weight(model, name.removesuffix(f"{BASE_LAYER}weight"), tensor, layer)
        merged[name.removeprefix(PEFT_PREFIX).replace(BASE_LAYER, ".")] = tensor
    return merged


def merged_weight(model: torch.nn.Module, module_name: str, weight: torch.Tensor,
                  layer: dict[str, torch.Tensor]) -> torch.Tensor:
    """LoRA layer ``module_name``'s base ``weight`` [out, in] plus each active, unmerged adapter's update
    ``transpose(B @ A, fan_in_fan_out) x scaling`` (peft's ``merge``, with its ``get_delta_weight``: in
    float32 on CPU for half-precision weights), as a new tensor, from the whole tensors in ``layer``.
    A ValueError naming the layer for what this does not merge (DoRA and other variants, a LoRA bias,
    an embedding or convolution adapter)."""
    module = model.get_submodule(module_name)
    if module.disable_adapters:
        return weight
    for adapter in module.active_adapters:
        if adapter in module.merged_adapters:
            continue
        linear = adapter in module.lora_A and isinstance(module.lora_A[adapter], torch.nn.Linear)
        other = adapter in getattr(module, "lora_embedding_A", {}) or (adapter in module.lora_A and not linear)
        if other or adapter in module.lora_variant or module.lora_bias.get(adapter):
            raise ValueError(f"LoRA layer {module_name!r} (adapter {adapter!r}) is not a plain LoRA adapter of a "
                             "linear layer, which is all a rollout engine's weight sync merges: use plain LoRA on "
                             'linear layers, or rollout_backend = "hf"')
        if not linear:
            continue
        a = layer[f"{module_name}.lora_A.{adapter}.weight"]  # [r, in]
        b = layer[f"{module_name}.lora_B.{adapter}.weight"]  # [out, r]
        half_on_cpu = b.device.type == "cpu" and b.dtype in (torch.float16, torch.bfloat16)
        product = b.float() @ a.float() if half_on_cpu else b @ a  # [out, in]
        product = product.T if module.fan_in_fan_out else product
        weight = weight + (product * module.scaling[adapter]).to(b.dtype)  # [out, in]
    return weight


def checkpoint_names(model: torch.nn.Module, tensors: dict[str, torch.Tensor]) -> Iterator[tuple[str, torch.Tensor]]:
    """``tensors`` (``model``'s, by in-memory name) under the names ``model.save_pretrained`` writes."""
    from transformers.core_model_loading import revert_weight_conversion

    yield from revert_weight_conversion(model, tensors).items()
