"""``generation.policy_weights``: what a rollout engine's weight sync reads of the policy, one layer at a time.

On the embedded tiny model (two decoder layers, two vision blocks): every tensor comes once, under the
name and with the values of the checkpoint it was loaded from; a sharded (FSDP2) policy is gathered one
layer at a time, so the whole tensors alive at once are at most one layer's, never the model's; a LoRA
policy's adapted weights are merged one layer at a time as peft merges them, and the policy is left
bit for bit as it was. The consumer below keeps no reference, as vLLM's loader keeps none past a layer.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist
from peft import LoraConfig, get_peft_model
from safetensors.torch import load_file
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from aerorl_ops.generation.policy_weights import layer_groups, layer_key, policy_weights


def test_names_are_cut_into_runs_of_one_layer_each():
    names = ["model.embed_tokens.weight", "model.layers.0.q.weight", "model.layers.0.q.bias",
             "model.layers.1.q.weight", "model.layers.10.q.weight", "model.norm.weight", "lm_head.weight"]
    assert list(layer_groups(names)) == [
        ("model.embed_tokens", ["model.embed_tokens.weight"]),
        ("model.layers.0", ["model.layers.0.q.weight", "model.layers.0.q.bias"]),
        ("model.layers.1", ["model.layers.1.q.weight"]),
        ("model.layers.10", ["model.layers.10.q.weight"]),
        ("model.norm", ["model.norm.weight"]),
        ("lm_head", ["lm_head.weight"])]


def consumed(weights: Iterator[tuple[str, torch.Tensor]], checkpoint: dict[str, torch.Tensor]) -> dict:
    """Read ``weights`` as an engine does, holding nothing: check each against ``checkpoint`` (None: skip),
    and record which yielded tensors were still alive at each step and their bytes."""
    seen, refs, peak, layers_alive = [], [], 0, 1
    for name, tensor in weights:
        seen.append(name)
        if checkpoint is not None:
            assert torch.equal(tensor, checkpoint[name]), name
        refs.append((name, weakref.ref(tensor), tensor.numel() * tensor.element_size()))
        del tensor
        alive = [(n, size) for n, ref, size in refs if ref() is not None]
        peak = max(peak, sum(size for _, size in alive))
        layers_alive = max(layers_alive, len({layer_key(n) for n, _ in alive}))
    return {"names": seen, "peak": peak, "layers_alive": layers_alive, "total": sum(size for *_, size in refs)}


def largest_layer_bytes(tensors: dict[str, torch.Tensor]) -> int:
    return max(sum(tensors[n].numel() * tensors[n].element_size() for n in names)
               for _, names in layer_groups(list(tensors)))


def test_a_policy_yields_each_checkpoint_tensor_once_under_its_name(fresh_tiny_vlm, tiny_model_dir):
    checkpoint = load_file(tiny_model_dir / "model.safetensors")
    read = consumed(policy_weights(fresh_tiny_vlm.model), checkpoint)
    assert sorted(read["names"]) == sorted(checkpoint)  # each once, the checkpoint's names
    assert "visual.patch_embed.proj.weight" in read["names"]  # not transformers 5's in-memory name
    assert read["layers_alive"] == 1


def sharded_weights(model: torch.nn.Module, expected: dict[str, torch.Tensor]) -> dict:
    """``consumed`` of ``model``'s weights after FSDP2 shards it (as ``rl.runtime.sharding`` does: each block,
    then the base model) over a one-rank mesh: the collectives of two ranks, with one taking part."""
    root = model.get_base_model() if hasattr(model, "get_base_model") else model
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,))
        blocks = set(root._no_split_modules)
        for module in reversed(list(root.modules())):
            if module is not root and type(module).__name__ in blocks:
                fully_shard(module, mesh=mesh)
        fully_shard(root, mesh=mesh)
        assert all(type(t).__name__ == "DTensor" for t in model.state_dict().values())
        return consumed(policy_weights(model), expected)
    finally:
        dist.destroy_process_group()


def test_a_sharded_policy_is_gathered_one_layer_at_a_time(fresh_tiny_vlm, tiny_model_dir):
    """The yielded tensors are gathered whole, one layer's alive at a time."""
    checkpoint = load_file(tiny_model_dir / "model.safetensors")
    read = sharded_weights(fresh_tiny_vlm.model, checkpoint)
    assert sorted(read["names"]) == sorted(checkpoint)
    assert read["layers_alive"] == 1
    assert read["peak"] == largest_layer_bytes(checkpoint)  # one decoder layer: 788,480 bytes ...
    assert read["total"] == sum(t.numel() * t.element_size() for t in checkpoint.values())  # ... of 3,722,240
    assert read["peak"] < read["total"] / 4


def lora_policy(loaded, **options):
    torch.manual_seed(0)
    config = LoraConfig(r=4, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False, **options)
    return get_peft_model(loaded.model, config)  # non-zero adapters: merging changes the weights


def test_a_lora_policy_is_merged_one_layer_at_a_time_and_left_unchanged(fresh_tiny_vlm, tiny_model_dir):
    lora = lora_policy(fresh_tiny_vlm)
    before = {name: tensor.clone() for name, tensor in lora.state_dict().items()}
    expected = dict(policy_weights(copy.deepcopy(lora).merge_and_unload()))  # a plain model, merged by peft
    read = consumed(policy_weights(lora), expected)  # bit for bit what peft's merge gives
    assert read["names"] == list(expected) and sorted(expected) == sorted(load_file(tiny_model_dir /
                                                                                    "model.safetensors"))
    assert read["layers_alive"] == 1
    assert all(torch.equal(tensor, before[name]) for name, tensor in lora.state_dict().items())  # not merged
    assert not any(module.merged for module in lora.modules() if hasattr(module, "merged"))


def test_a_sharded_lora_policy_is_merged_from_its_gathered_layers(fresh_tiny_vlm):
    lora = lora_policy(fresh_tiny_vlm)
    expected = dict(policy_weights(copy.deepcopy(lora).merge_and_unload()))
    read = sharded_weights(lora, expected)
    assert read["names"] == list(expected) and read["layers_alive"] == 1


def test_a_lora_variant_the_sync_cannot_merge_is_named(fresh_tiny_vlm):
    lora = lora_policy(fresh_tiny_vlm, use_dora=True)
    with pytest.raises(ValueError, match=r"^LoRA layer 'base_model\.model\.model\.language_model\.layers\.0\."
                                         r"self_attn\.q_proj' \(adapter 'default'\) is not a plain LoRA adapter"):
        list(policy_weights(lora))
