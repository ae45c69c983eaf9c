"""A training run's checkpoint named like a model: ``<run_id>@<step>`` or ``<run_id>@latest``.

A training run saves its checkpoints as ``<checkpoints>/<run_id>/step-<N>`` folders, each loadable
with ``from_pretrained``. The checkpoints folder sits beside the models folder (``data/models`` and
``data/checkpoints``), so wherever a model is named (a ``[models]`` entry's ``source``, ``aerorl eval
--model``, ``base_model``) a reference resolves to its folder. ``latest`` is the highest step whose
folder is complete (the policy's ``config.json`` and the trainer's state are both there). A reference
to a run or step that does not exist is one line naming what there is.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from aerorl_ops.models.errors import ModelUnavailableError

CHECKPOINTS_DIR_NAME = "checkpoints"
STEP_PREFIX = "step-"
MODEL_CONFIG = "config.json"
TRAINER_STATE = "trainer_state.pt"
VALUE_HEAD = "value_head.pt"
OPTIMIZER_SHARDS = "optimizer_shards"
"""A sharded run's optimizer state: a ``torch.distributed.checkpoint`` folder (``rl.runtime.sharded_checkpoint``)."""
COMPLETE_FILES = (MODEL_CONFIG, TRAINER_STATE)
TRAINER_FILES = (TRAINER_STATE, VALUE_HEAD, OPTIMIZER_SHARDS)
"""What a checkpoint holds beside the policy (the optimizer and step; PPO's value head; a sharded run's
optimizer state, a folder)."""
LATEST = "latest"
_REFERENCE = re.compile(r"^(?P<run>[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99})@(?P<step>latest|[0-9]{1,18})$")
"""``run_id@step``: a step in ASCII digits, at most 18 of them (a 64-bit integer)."""


class CheckpointNotFound(ModelUnavailableError):
    """A checkpoint reference names a run or step that has no complete checkpoint."""


@dataclass(frozen=True)
class CheckpointRef:
    """``run_id@step`` (``step`` None: ``run_id@latest``).

    >>> CheckpointRef.parse("rl-1a2b@40"), str(CheckpointRef.parse("rl-1a2b@latest"))
    (CheckpointRef(run_id='rl-1a2b', step=40), 'rl-1a2b@latest')
    >>> CheckpointRef.parse("tiny-qwen2-vl") is None
    True
    """

    run_id: str
    step: int | None = None

    @classmethod
    def parse(cls, text: str) -> CheckpointRef | None:
        """The reference ``text`` spells, or None when it is not one."""
        match = _REFERENCE.match(text)
        if match is None:
            return None
        step = match["step"]
        return cls(match["run"], None if step == LATEST else int(step))

    def __str__(self) -> str:
        return f"{self.run_id}@{LATEST if self.step is None else self.step}"


def checkpoints_dir(models_dir: Path) -> Path:
    """Where training runs save their checkpoints: beside ``models_dir``."""
    return Path(models_dir).parent / CHECKPOINTS_DIR_NAME


def step_folder(run_dir: Path, step: int) -> Path:
    """The folder of the checkpoint at ``step`` of the run saved under ``run_dir``."""
    return Path(run_dir) / f"{STEP_PREFIX}{step}"


def step_folders(run_dir: Path) -> list[tuple[int, Path]]:
    """The ``step-N`` folders under ``run_dir`` (complete or not), newest (largest N) first."""
    found = [(int(p.name.removeprefix(STEP_PREFIX)), p) for p in Path(run_dir).glob(f"{STEP_PREFIX}*")
             if p.is_dir() and p.name.removeprefix(STEP_PREFIX).isdigit()]
    return sorted(found, reverse=True)


def saved_steps(run_dir: Path) -> list[int]:
    """The steps of ``run_dir``'s complete ``step-N`` folders, in order."""
    return sorted(step for step, folder in step_folders(run_dir)
                  if all((folder / name).is_file() for name in COMPLETE_FILES))


def resolve_checkpoint(ref: CheckpointRef, checkpoints: Path) -> Path:
    """The folder of ``ref`` under ``checkpoints``; ``CheckpointNotFound`` (one line) when there is none."""
    run_dir = Path(checkpoints) / ref.run_id
    steps = saved_steps(run_dir)
    if not steps:
        raise CheckpointNotFound(f"checkpoint {ref}: training run {ref.run_id!r} has no complete checkpoint under "
                                 f"{checkpoints}")
    step = steps[-1] if ref.step is None else ref.step
    if step not in steps:
        raise CheckpointNotFound(f"checkpoint {ref} does not exist: run {ref.run_id!r} has checkpoints at steps "
                                 f"{', '.join(map(str, steps))} (or {ref.run_id}@latest)")
    return step_folder(run_dir, step)


def check_checkpoint_path(source: str, checkpoints: Path) -> None:
    """``CheckpointNotFound`` when ``source`` is a folder path inside a training run's checkpoints (its
    parent is ``<checkpoints>/<run>``) that does not exist: the message lists the run's checkpoints
    and suggests the newest as a reference. Anything else (a hub id, an existing folder) passes.

    >>> check_checkpoint_path("Qwen/Qwen2-VL-2B-Instruct", Path("data/checkpoints"))
    """
    path = Path(os.path.expanduser(source))
    run_dir = path.parent
    if os.path.isdir(path) or not os.path.isdir(run_dir) or run_dir.parent.resolve() != Path(checkpoints).resolve():
        return
    steps = saved_steps(run_dir)
    if not steps:
        raise CheckpointNotFound(f"no checkpoint folder {source}: training run {run_dir.name!r} has no complete "
                                 f"checkpoint under {checkpoints}")
    listed = ", ".join(f"{run_dir.name}@{step}" for step in steps)
    raise CheckpointNotFound(f"no checkpoint folder {source}: run {run_dir.name!r} has checkpoints {listed} "
                             f"(the newest is also {run_dir.name}@{LATEST}): did you mean {run_dir.name}@{steps[-1]}?")


def content_hash(folder: Path) -> str:
    """SHA-256 over the checkpoint's policy files (weights, configs, tokenizer; names and bytes, in name
    order), not the trainer's state: two folders of the same model hash alike."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(folder).rglob("*")
                       if p.is_file() and p.relative_to(folder).parts[0] not in TRAINER_FILES):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()
