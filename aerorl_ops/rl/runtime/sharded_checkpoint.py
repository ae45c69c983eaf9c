"""A sharded run's checkpoints (``sharding = "fsdp2"``, ``rl.runtime.sharding``): the same folder as
``rl.runtime.checkpoint_files``'s, written by every rank together, resumable on any number of ranks, sharded or not.

- The policy is gathered to rank 0 (``get_model_state_dict(..., full_state_dict=True, cpu_offload=True)``)
  and saved as a Hugging Face folder (a LoRA policy merged, its adapter in ``adapter/``), with the
  processor, so the checkpoint loads and benchmarks as any model; the value head too (``value_head.pt``).
- The optimizer's state goes through ``torch.distributed.checkpoint`` (DCP) into ``optimizer_shards/``:
  each rank writes its own shards, keyed by parameter name (:func:`state_module`), and DCP reads them
  back resharded for any number of ranks, or whole for one process (2 ranks -> 1, 1 -> 2).
- ``trainer_state.pt`` holds the step and the reference's source, and names ``optimizer_shards``.

The write is crash-safe as ``rl.runtime.checkpoint_files``'s: rank 0 makes a temporary sibling folder and tells the
others its name, every rank writes its part there, and rank 0 renames it into place once all have
finished, so a complete folder (``models.checkpoint_refs.COMPLETE_FILES``) always holds every rank's shards.
An unsharded run's optimizer state (one ``trainer_state.pt``) loads into sharded ranks too
(:func:`load_full_optimizer`).
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from peft import PeftModel
from torch import nn
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from aerorl_ops.models.checkpoint_refs import OPTIMIZER_SHARDS, TRAINER_STATE, VALUE_HEAD
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rl.runtime.checkpoint_files import replace_dir
from aerorl_ops.rl.runtime.distributed import DataParallel
from aerorl_ops.rl.runtime.lora import save_policy

GATHERED = StateDictOptions(full_state_dict=True, cpu_offload=True)
"""Whole tensors, on rank 0's CPU only (the other ranks get an empty dict)."""


def state_module(model: nn.Module, head: nn.Module | None) -> nn.Module:
    """The policy's transformers model (a LoRA policy's base, which holds every parameter) and the value head
    under one module: its parameter names key the optimizer's state in ``optimizer_shards``."""
    named = nn.ModuleDict({"policy": model.get_base_model() if isinstance(model, PeftModel) else model})
    if head is not None:
        named["value_head"] = head
    return named


def save_sharded_checkpoint(directory: Path, loaded: LoadedVLM, optimizer: torch.optim.Optimizer, named: nn.Module,
                            step: int, reference_source: str, head: nn.Module | None, dp: DataParallel) -> Path:
    """Every rank: write the checkpoint (module docstring) into a temporary sibling of ``directory``, then
    rank 0 renames it into place. ``named``: :func:`state_module` of the policy and ``head``."""
    directory = Path(directory)
    staging = Path(dp.from_main(_staging_folder(directory) if dp.is_main else ""))
    try:
        policy = get_model_state_dict(loaded.model, options=GATHERED)
        head_state = get_model_state_dict(head, options=GATHERED) if head is not None else None
        dcp.save({"optimizer": get_optimizer_state_dict(named, optimizer)}, checkpoint_id=staging / OPTIMIZER_SHARDS)
        if dp.is_main:
            save_policy(loaded.model, staging, policy)
            loaded.processor.save_pretrained(staging)
            torch.save({"step": step, "reference_source": reference_source, "optimizer": {},
                        OPTIMIZER_SHARDS: OPTIMIZER_SHARDS}, staging / TRAINER_STATE)
            if head_state is not None:
                torch.save(head_state, staging / VALUE_HEAD)
        dp.barrier()  # every rank's shards are written
        if dp.is_main:
            replace_dir(staging, directory)
    except BaseException:
        if dp.is_main:
            shutil.rmtree(staging, ignore_errors=True)
        raise
    dp.barrier()  # no rank goes on before the folder is in place
    return directory


def _staging_folder(directory: Path) -> str:
    directory.parent.mkdir(parents=True, exist_ok=True)
    return tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent)


def load_optimizer_shards(named: nn.Module, optimizer: torch.optim.Optimizer, shards: Path) -> None:
    """``optimizer`` (over ``named``'s parameters, sharded or whole) from the shards a sharded run wrote,
    whatever its number of ranks."""
    state = get_optimizer_state_dict(named, optimizer)  # this optimizer's layout (its state initialised)
    saved = set(FileSystemReader(str(shards)).read_metadata().state_dict_metadata)
    state["state"] = {name: values for name, values in state["state"].items()  # a parameter never updated has none
                      if all(f"optimizer.state.{name}.{key}" in saved for key in values)}
    with warnings.catch_warnings():  # one process reads the shards whole, as meant: torch says so in a warning
        warnings.filterwarnings("ignore", message=".*assuming the intent is to load in a single process")
        dcp.load({"optimizer": state}, checkpoint_id=shards, no_dist=not dist.is_initialized())
    _set_optimizer(named, optimizer, state, StateDictOptions(strict=False))


def load_full_optimizer(named: nn.Module, optimizer: torch.optim.Optimizer, saved: dict) -> None:
    """``optimizer`` (over ``named``'s sharded parameters) from an unsharded run's ``optimizer.state_dict()``
    (keyed by position in the optimizer): re-keyed by parameter name, then sharded."""
    names = {id(p): name for name, p in named.named_parameters()}
    order = [names[id(p)] for group in optimizer.param_groups for p in group["params"]]
    by_name = {"state": {order[index]: state for index, state in saved["state"].items()},
               "param_groups": [{**group, "params": [order[index] for index in group["params"]]}
                                for group in saved["param_groups"]]}
    _set_optimizer(named, optimizer, by_name, StateDictOptions(full_state_dict=True, strict=False))


def _set_optimizer(named: nn.Module, optimizer: torch.optim.Optimizer, state: dict, options: StateDictOptions) -> None:
    """``state`` (keyed by parameter name) into ``optimizer``; a parameter it has no state for is left with
    none, as ``Optimizer.load_state_dict`` leaves it (PPO's value head never updated in the warm-up)."""
    set_optimizer_state_dict(named, optimizer, state, options=options)
    for name, param in named.named_parameters():
        if name not in state["state"]:
            optimizer.state.pop(param, None)


def set_full_state(module: nn.Module, state: dict) -> None:
    """A sharded ``module``'s parameters from whole tensors (every rank keeps its shard)."""
    set_model_state_dict(module, state, options=StateDictOptions(full_state_dict=True))
