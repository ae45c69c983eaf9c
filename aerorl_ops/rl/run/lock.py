"""One process per training run: a lock file beside the run's checkpoints, holding the trainer's pid.

Two ``aerorl train`` of one run at once would both resume from the same checkpoint and train the same
steps twice. :func:`run_lock` takes ``<checkpoints>/<run_id>.lock`` (an exclusive ``flock``, which the
kernel lets go when the process dies) and writes the pid into it:

* held by a live process: :class:`RunInProgress` names the run and that pid, and nothing runs;
* left by a process that is gone (its pid still in the file): taken over, and ``log`` says so;
* on release the pid is cleared, so a clean exit leaves nothing to take over.

Under the lock, :func:`remove_leftovers` removes what a killed checkpoint write left in the run's folder:
every checkpoint (``step-N``, ``warmup``) is written into a hidden sibling ``.<name>.<random>`` and an
older one renamed aside into ``.<name>.old.<random>`` (``rl.runtime.checkpoint_files``,
``rl.runtime.sharded_checkpoint``).
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from aerorl_ops.config.fields import ConfigError

if TYPE_CHECKING:
    from aerorl_ops.rl.record.reporters import Log

LOCK_SUFFIX = ".lock"


class RunInProgress(ConfigError):
    """Another live process trains this run (an input error: the command exits 2)."""


def lock_path(checkpoints_dir: Path, run_id: str) -> Path:
    """The lock file of run ``run_id``: beside its checkpoint folder."""
    return Path(checkpoints_dir) / f"{run_id}{LOCK_SUFFIX}"


@contextmanager
def run_lock(checkpoints_dir: Path, run_id: str, log: Log) -> Iterator[Path]:
    """Hold run ``run_id``'s lock while the block runs (module docstring); yields the lock file."""
    path = lock_path(checkpoints_dir, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunInProgress(f"run {run_id} is being trained by pid {_holder(descriptor) or 'unknown'} "
                                f"(lock {path}): wait for it to end, or stop that process first") from None
        earlier = _holder(descriptor)
        if earlier and earlier != os.getpid():
            log.warning(f"run {run_id}: took over the lock of pid {earlier}, which is gone ({path})")
        _write_pid(descriptor, str(os.getpid()))
        try:
            yield path
        finally:
            _write_pid(descriptor, "")
            fcntl.flock(descriptor, fcntl.LOCK_UN)
    finally:
        os.close(descriptor)


def remove_leftovers(run_dir: Path, run_id: str, log: Log) -> list[Path]:
    """Remove the temporary folders a killed checkpoint write left under ``run_dir`` (call it holding
    the run's lock: then no write is in progress); each removal is a warning line. Returns them."""
    leftovers = sorted(p for p in Path(run_dir).glob(".*") if p.is_dir())  # only checkpoint writes make them
    for folder in leftovers:
        shutil.rmtree(folder)
        log.warning(f"run {run_id}: removed {folder.name}, a checkpoint write that did not finish ({folder})")
    return leftovers


def _holder(descriptor: int) -> int | None:
    os.lseek(descriptor, 0, os.SEEK_SET)
    text = os.read(descriptor, 32).decode(errors="replace").strip()
    return int(text) if text.isdigit() else None


def _write_pid(descriptor: int, text: str) -> None:
    os.ftruncate(descriptor, 0)
    os.lseek(descriptor, 0, os.SEEK_SET)
    os.write(descriptor, text.encode())
