"""How the ranks of a run hold the policy, its gradients and AdamW state: whole on every rank, or sharded.

``sharding = "none"`` (:class:`Replicated`, and always with one process): every rank holds the whole
policy (and value head), its gradients and optimizer state. Gradients are summed over the ranks once
per update (``DataParallel.all_reduce_gradients``), and rank 0's parameters are broadcast whenever the
optimizer holds new ones.

``sharding = "fsdp2"`` on several ranks (:class:`FullyShardedFSDP2`): ``torch.distributed.fsdp.fully_shard``
splits every parameter over the ranks along dimension 0 (a ``DTensor``). Each block of the model (its
``_no_split_modules``: the decoder layers and the vision tower's blocks) is one unit, gathered for its
forward and its backward and freed after them; then the root (embeddings, LM head, projector, norms);
PPO's value head is a unit of its own. Each backward reduce-scatters the gradients, summed rather than
averaged (every loss share already divides by the global count, as in ``rl.runtime.distributed``), so each rank
keeps its shard of the gradient and of AdamW's state, and ``clip_grad_norm_`` takes the norm across the
shards. LoRA's frozen base is sharded like the adapters it carries; a frozen vision tower is sharded and
gets no gradient. A quantized reference is not sharded: it is frozen and small, and each rank scores
its own rows with its own copy (``lora_base`` scores with the sharded policy itself). On a GPU the
policy computes in bfloat16 with float32 gradient reduction (``MixedPrecisionPolicy``; log-probs then
come out in bfloat16, as from a model loaded in bfloat16), and ``cpu_offload`` keeps the shards,
gradients and AdamW state in host memory; on CPU (gloo) everything stays float32.

Everything that runs a sharded policy runs on every rank at once, since each unit's parameters are
gathered collectively: rollouts (``generate`` steps all ranks together, HF's ``synced_gpus``, so a rank
whose replies ended keeps stepping with the others), scoring, the held-out evaluations, checkpoints
(:attr:`Sharding.collective`). The fused log-prob path reads the LM head's weight outside any module's
forward, so it runs as a registered forward method of the root (``SCORING_METHOD``),
inside which FSDP has gathered the root's parameters; so does ``generate``, which encodes the images
before its first forward.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol

import torch
from peft import PeftModel
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import (
    CPUOffloadPolicy,
    FSDPModule,
    MixedPrecisionPolicy,
    fully_shard,
    register_fsdp_forward_method,
)
from torch.distributed.tensor import DTensor

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rl.runtime.checkpoint_files import CheckpointState, save_checkpoint
from aerorl_ops.rl.runtime.distributed import DataParallel
from aerorl_ops.rl.runtime.policy import PolicyRuntime
from aerorl_ops.rl.runtime.sharded_checkpoint import (
    load_full_optimizer,
    load_optimizer_shards,
    save_sharded_checkpoint,
    set_full_state,
)
from aerorl_ops.rl.runtime.value_head import ValueHead

SCORING_METHOD = "aerorl_completion_tokens"
"""A prepared policy's model carries the step's scoring (``rl.step.token_scoring.TokenScoring``: packed or padded,
its precision and LM-head kernel) under this name, which ``rl.step.sequences.completion_tokens`` calls; a sharded
policy's as a registered FSDP forward method, so its root's parameters (the LM head's weight it reads) are
gathered."""
Scoring = Callable[..., object]


def base_model(model: nn.Module) -> nn.Module:
    """The transformers model under a peft wrapper (LoRA), else ``model``: it holds every parameter."""
    return model.get_base_model() if isinstance(model, PeftModel) else model


def enable_activation_checkpointing(model: nn.Module) -> None:
    """Recompute each block's activations in the backward (transformers' gradient checkpointing, non-reentrant,
    so a frozen base under LoRA needs no input gradients)."""
    inner = base_model(model)
    if not inner.is_activation_checkpointing:
        inner.activation_checkpointing_enable()  # non-reentrant by default


def local_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of ``tensors`` as this rank holds them (a ``DTensor``'s local shard)."""
    total = 0
    for tensor in tensors:
        local = tensor.to_local() if isinstance(tensor, DTensor) else tensor
        total += local.numel() * local.element_size()
    return total


def held_bytes(model: nn.Module, head: nn.Module | None, optimizer: torch.optim.Optimizer) -> int:
    """Bytes this rank holds for the policy's (and value head's) parameters, their gradients and the
    optimizer's state."""
    params = list(model.parameters()) + (list(head.parameters()) if head is not None else [])
    grads = [p.grad for p in params if p.grad is not None]
    held = [value for state in optimizer.state.values() for value in state.values() if torch.is_tensor(value)]
    return local_bytes(params) + local_bytes(grads) + local_bytes(held)


class Sharding(Protocol):
    """What the trainer asks of the way ranks hold its state (see the module docstring)."""

    collective: bool
    """Whether every rank runs the main rank's work (evaluations, checkpoints, the control) with it."""

    def prepare(self, policy: PolicyRuntime, scoring: Scoring) -> None:
        """Ready the loaded policy to train (idempotent: a model already prepared is left as it is); ``scoring``:
        the step's per-token scoring, which the model carries (``SCORING_METHOD``; a sharded model runs it as a
        forward method)."""

    def prepare_head(self, head: ValueHead) -> ValueHead: ...

    def parameters(self, model: nn.Module) -> list[nn.Parameter]:
        """The model's parameters as the optimizer holds them."""

    def broadcast_parameters(self, dp: DataParallel, params: Sequence[nn.Parameter]) -> None: ...

    def reduce_gradients(self, dp: DataParallel, params: Sequence[nn.Parameter]) -> None: ...

    def load_optimizer(self, named: nn.Module, optimizer: torch.optim.Optimizer, state: CheckpointState) -> None: ...

    def load_head(self, head: nn.Module, state: dict) -> None: ...

    def save(self, directory: Path, loaded: LoadedVLM, optimizer: torch.optim.Optimizer, named: nn.Module,
             step: int, reference_source: str, head: nn.Module | None) -> Path:
        """Checkpoint ``directory`` (``named``: the policy and value head whose parameters the optimizer holds,
        ``sharded_checkpoint.state_module``; ``head``: the value head to save, if any)."""


class Replicated:
    """Every rank holds everything (``sharding = "none"``, and one process whatever the setting)."""

    collective = False

    def __init__(self, gradient_checkpointing: bool = False) -> None:
        self.gradient_checkpointing = gradient_checkpointing

    def prepare(self, policy: PolicyRuntime, scoring: Scoring) -> None:
        if self.gradient_checkpointing:
            enable_activation_checkpointing(policy.loaded.model)
        setattr(base_model(policy.loaded.model), SCORING_METHOD, scoring)

    def prepare_head(self, head: ValueHead) -> ValueHead:
        return head

    def parameters(self, model: nn.Module) -> list[nn.Parameter]:
        return list(model.parameters())

    def broadcast_parameters(self, dp: DataParallel, params: Sequence[nn.Parameter]) -> None:
        dp.broadcast_parameters(params)

    def reduce_gradients(self, dp: DataParallel, params: Sequence[nn.Parameter]) -> None:
        dp.all_reduce_gradients(params)

    def load_optimizer(self, named: nn.Module, optimizer: torch.optim.Optimizer, state: CheckpointState) -> None:
        """The checkpoint's optimizer state: its one file, or the shards a sharded run wrote (read whole)."""
        if state.optimizer_shards is None:
            optimizer.load_state_dict(state.optimizer)
        else:
            load_optimizer_shards(named, optimizer, state.optimizer_shards)

    def load_head(self, head: nn.Module, state: dict) -> None:
        head.load_state_dict(state)

    def save(self, directory: Path, loaded: LoadedVLM, optimizer: torch.optim.Optimizer, named: nn.Module,
             step: int, reference_source: str, head: nn.Module | None) -> Path:
        return save_checkpoint(directory, loaded, optimizer, step, reference_source, *((head,) if head else ()))


class FullyShardedFSDP2:
    """The policy, the value head, their gradients and AdamW state sharded over ``dp``'s ranks with FSDP2."""

    collective = True

    def __init__(self, dp: DataParallel, settings: TrainingSettings) -> None:
        self.dp, self.settings = dp, settings
        self.mesh = init_device_mesh(dp.device.type, (dp.world_size,))
        gpu = dp.device.type == "cuda"
        self.offload = CPUOffloadPolicy() if settings.cpu_offload and gpu else None  # on CPU shards are in host memory
        self.mixed = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if gpu else None

    def _shard(self, module: nn.Module, mixed: bool = True) -> None:
        options = {"mesh": self.mesh}
        if self.offload is not None:
            options["offload_policy"] = self.offload
        if mixed and self.mixed is not None:
            options["mp_policy"] = self.mixed
        fully_shard(module, **options)
        module.set_gradient_divide_factor(1.0)  # a sum: every loss share already divides by the global count
        module.set_force_sum_reduction_for_comms(True)  # gloo has no pre-multiplied sum

    def prepare(self, policy: PolicyRuntime, scoring: Scoring) -> None:
        model = policy.loaded.model
        root = base_model(model)
        if isinstance(root, FSDPModule):
            return
        if self.settings.gradient_checkpointing:
            enable_activation_checkpointing(model)
        blocks = set(getattr(root, "_no_split_modules", None) or ())
        for module in reversed(list(root.modules())):  # innermost first: a unit never holds another's parameters
            if module is not root and type(module).__name__ in blocks:
                self._shard(module)
        self._shard(root)
        root._is_fsdp_managed_module = True  # transformers' generate then steps every rank together (synced_gpus)
        setattr(root, SCORING_METHOD, scoring)
        for method in (SCORING_METHOD, "generate"):  # generate encodes the images before its first forward
            register_fsdp_forward_method(root, method)
        self._first_gather(root)

    @staticmethod
    def _first_gather(model: nn.Module) -> None:
        """Gather and free every unit once: FSDP allocates its gathered tensors at the first gather, which
        must not happen under ``torch.inference_mode`` (rollouts and evaluations) or training could not
        write them."""
        for module in model.modules():
            if isinstance(module, FSDPModule):
                module.unshard()
                module.reshard()

    def prepare_head(self, head: ValueHead) -> ValueHead:
        self._shard(head.linear, mixed=False)  # float32, as the head computes (its own output is a view: not a unit)
        self._first_gather(head)
        return head

    def parameters(self, model: nn.Module) -> list[nn.Parameter]:
        """The sharded parameters: every unit resharded first (after a forward without backward the root
        keeps its gathered ones registered)."""
        for module in model.modules():
            if isinstance(module, FSDPModule):
                module.reshard()
        return list(model.parameters())

    def broadcast_parameters(self, dp: DataParallel, params: Sequence[nn.Parameter]) -> None:
        """Nothing: every rank loaded the same weights (and seeded adapters) and keeps its shard of them."""

    def reduce_gradients(self, dp: DataParallel, params: Sequence[nn.Parameter]) -> None:
        """Nothing: each backward reduce-scattered its gradients."""

    def load_optimizer(self, named: nn.Module, optimizer: torch.optim.Optimizer, state: CheckpointState) -> None:
        """The checkpoint's optimizer state, resharded over these ranks: from its shards (any world size), or
        from the one file an unsharded run wrote."""
        self.parameters(named)
        if state.optimizer_shards is None:
            load_full_optimizer(named, optimizer, state.optimizer)
        else:
            load_optimizer_shards(named, optimizer, state.optimizer_shards)

    def load_head(self, head: nn.Module, state: dict) -> None:
        set_full_state(head, state)

    def save(self, directory: Path, loaded: LoadedVLM, optimizer: torch.optim.Optimizer, named: nn.Module,
             step: int, reference_source: str, head: nn.Module | None) -> Path:
        self.parameters(named)
        return save_sharded_checkpoint(directory, loaded, optimizer, named, step, reference_source, head, self.dp)


def sharding_for(settings: TrainingSettings, dp: DataParallel) -> Sharding:
    """FSDP2 when ``settings.sharding`` asks for it and there are ranks to shard over; else every rank
    holds everything (one process has nothing to shard across)."""
    if settings.sharding == "fsdp2" and dp.world_size > 1:
        return FullyShardedFSDP2(dp, settings)
    return Replicated(settings.gradient_checkpointing)
