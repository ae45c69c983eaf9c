"""Training checkpoints: a loadable policy folder plus the trainer's state.

``<dir>/`` holds the policy (``save_pretrained``) and processor, so it loads through
``from_pretrained`` like any checkpoint and can be benchmarked as one more model;
``<dir>/trainer_state.pt`` holds the optimizer state, the step and the reference's source. A LoRA
policy is saved merged, with its adapter in ``<dir>/adapter`` (``rl.lora.save_policy``), so it
loads the same way; loading the folder for training continues the adapter. ``<dir>/value_head.pt``
holds the value head's weights when the algorithm has one (PPO).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from aerorl_ops.models.image_only_processor import save_processor
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rl.lora import save_policy

TRAINER_STATE = "trainer_state.pt"
VALUE_HEAD = "value_head.pt"


@dataclass(frozen=True)
class CheckpointState:
    step: int
    reference_source: str
    optimizer: dict
    value_head: dict | None = None  # the value head's state_dict, when the checkpoint has one


def save_checkpoint(directory: Path, loaded: LoadedVLM, optimizer: torch.optim.Optimizer | None, step: int,
                    reference_source: str, value_head: torch.nn.Module | None = None) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    save_policy(loaded.model, directory)
    save_processor(loaded.processor, directory)
    torch.save({"step": step, "reference_source": reference_source,
                "optimizer": optimizer.state_dict() if optimizer is not None else {}}, directory / TRAINER_STATE)
    if value_head is not None:
        torch.save(value_head.state_dict(), directory / VALUE_HEAD)
    return directory


def load_checkpoint_state(directory: Path) -> CheckpointState:
    path = Path(directory) / TRAINER_STATE
    if not path.exists():
        raise FileNotFoundError(f"{directory} is not a training checkpoint: {TRAINER_STATE} is missing")
    state = torch.load(path, weights_only=True)
    head = Path(directory) / VALUE_HEAD
    return CheckpointState(step=int(state["step"]), reference_source=str(state["reference_source"]),
                           optimizer=state["optimizer"],
                           value_head=torch.load(head, weights_only=True) if head.exists() else None)


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The ``step-N`` folder with the largest N under ``run_dir``, if any."""
    steps = [(int(p.name.split("-", 1)[1]), p) for p in Path(run_dir).glob("step-*")
             if p.name.split("-", 1)[1].isdigit() and (p / TRAINER_STATE).exists()]
    return max(steps)[1] if steps else None
