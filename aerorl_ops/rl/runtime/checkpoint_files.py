"""Training checkpoints: a loadable policy folder plus the trainer's state, written crash-safe.

``<dir>/`` holds the policy (``save_pretrained``) and processor, so it loads through
``from_pretrained`` like any checkpoint and can be benchmarked as one more model;
``<dir>/trainer_state.pt`` holds the optimizer state, the step and the reference's source. A LoRA
policy is saved merged, with its adapter in ``<dir>/adapter`` (``rl.runtime.lora.save_policy``), so it
loads the same way; loading the folder for training continues the adapter. ``<dir>/value_head.pt``
holds the value head's weights when the algorithm has one (PPO). A sharded run (``sharding = "fsdp2"``,
``rl.runtime.sharded_checkpoint``) writes the same folder, the policy gathered, with its optimizer state in
``<dir>/optimizer_shards/`` (``torch.distributed.checkpoint``) instead of ``trainer_state.pt``, which
then names that folder; either kind resumes with or without sharding, on any number of ranks.

A checkpoint is written into a temporary sibling folder (``.<name>.<random>``), then renamed into
place: a process killed while writing leaves no folder under the checkpoint's name. An older folder
of the same name is first renamed aside, and removed once the new one is in place. Resuming takes the
newest ``step-N`` folder that loads (:func:`newest_complete_checkpoint`); a torn one (written by an
older version, or damaged on disk) is skipped, and named in ``ResumePoint.skipped``.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import safe_open
from torch.distributed.checkpoint import FileSystemReader

from aerorl_ops.models.checkpoint_refs import MODEL_CONFIG, OPTIMIZER_SHARDS, TRAINER_STATE, VALUE_HEAD, step_folders
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rl.runtime.lora import save_policy


@dataclass(frozen=True)
class CheckpointState:
    step: int
    reference_source: str
    optimizer: dict
    value_head: dict | None = None  # the value head's state_dict, when the checkpoint has one
    optimizer_shards: Path | None = None  # a sharded run's optimizer state (then ``optimizer`` is empty)


@dataclass(frozen=True)
class TornCheckpoint:
    """A checkpoint folder that does not load, and why."""

    path: Path
    reason: str


@dataclass(frozen=True)
class ResumePoint:
    """Where a run starts: the newest complete checkpoint (None: from the start), its state, and the newer
    folders skipped because they are torn."""

    checkpoint: Path | None = None
    state: CheckpointState | None = None
    skipped: tuple[TornCheckpoint, ...] = field(default_factory=tuple)

    @property
    def step(self) -> int:
        return self.state.step if self.state else 0


def save_checkpoint(directory: Path, loaded: LoadedVLM, optimizer: torch.optim.Optimizer | None, step: int,
                    reference_source: str, value_head: torch.nn.Module | None = None) -> Path:
    """Write the checkpoint into a temporary sibling of ``directory``, then rename it into place."""
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        save_policy(loaded.model, staging)
        loaded.processor.save_pretrained(staging)
        torch.save({"step": step, "reference_source": reference_source,
                    "optimizer": optimizer.state_dict() if optimizer is not None else {}}, staging / TRAINER_STATE)
        if value_head is not None:
            torch.save(value_head.state_dict(), staging / VALUE_HEAD)
        replace_dir(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return directory


def replace_dir(new: Path, directory: Path) -> None:
    """Rename ``new`` to ``directory``; an existing ``directory`` is renamed aside first, then removed."""
    if not directory.exists():
        new.rename(directory)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{directory.name}.old.", dir=directory.parent))
    old.rmdir()
    directory.rename(old)
    new.rename(directory)
    shutil.rmtree(old, ignore_errors=True)


def load_checkpoint_state(directory: Path) -> CheckpointState:
    path = Path(directory) / TRAINER_STATE
    if not path.exists():
        raise FileNotFoundError(f"{directory} is not a training checkpoint: {TRAINER_STATE} is missing")
    state = torch.load(path, weights_only=True)
    head = Path(directory) / VALUE_HEAD
    shards = state.get(OPTIMIZER_SHARDS)
    return CheckpointState(step=int(state["step"]), reference_source=str(state["reference_source"]),
                           optimizer=state["optimizer"],
                           value_head=torch.load(head, weights_only=True) if head.exists() else None,
                           optimizer_shards=Path(directory) / shards if shards else None)


def checked_checkpoint_state(directory: Path) -> CheckpointState:
    """The trainer state of ``directory`` after checking that its files load: the model config, the
    header of every safetensors file, the trainer state, the value head and a sharded run's optimizer
    shards (their metadata). Raises ``ValueError``
    naming the folder and the file that does not."""
    directory = Path(directory)
    weights = sorted(directory.glob("*.safetensors"))
    if not (directory / MODEL_CONFIG).is_file() or not weights:
        raise ValueError(f"checkpoint {directory} lacks {MODEL_CONFIG} or its *.safetensors weights")
    for weight in weights:
        try:
            with safe_open(str(weight), framework="pt") as handle:
                handle.keys()
        except Exception as error:
            raise ValueError(f"checkpoint {directory}: {weight.name} does not load ({type(error).__name__}: "
                             f"{error})") from error
    try:
        state = load_checkpoint_state(directory)
    except Exception as error:
        names = f"{TRAINER_STATE} or {VALUE_HEAD}" if (directory / VALUE_HEAD).exists() else TRAINER_STATE
        raise ValueError(f"checkpoint {directory}: {names} does not load ({type(error).__name__}: {error})") from error
    if state.optimizer_shards is not None:
        try:
            FileSystemReader(str(state.optimizer_shards)).read_metadata()
        except Exception as error:
            raise ValueError(f"checkpoint {directory}: {OPTIMIZER_SHARDS} does not load ({type(error).__name__}: "
                             f"{error})") from error
    return state


def newest_complete_checkpoint(run_dir: Path) -> ResumePoint:
    """The newest ``step-N`` checkpoint under ``run_dir`` that loads; each newer, torn one is named, with
    the reason, in ``ResumePoint.skipped``."""
    skipped: list[TornCheckpoint] = []
    for _, path in step_folders(run_dir):
        try:
            state = checked_checkpoint_state(path)
        except ValueError as error:
            skipped.append(TornCheckpoint(path, str(error)))
            continue
        return ResumePoint(path, state, tuple(skipped))
    return ResumePoint(skipped=tuple(skipped))
