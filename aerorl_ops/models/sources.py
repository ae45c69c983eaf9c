"""Map a configured model entry to a loadable :class:`ModelSource`."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

import torch

from aerorl_ops.models.checkpoint_refs import (
    CheckpointRef,
    check_checkpoint_path,
    checkpoints_dir,
    resolve_checkpoint,
)
from aerorl_ops.models.embedded_default import build_tiny_qwen2vl
from aerorl_ops.models.entry import EMBEDDED_DEFAULT, ModelEntry
from aerorl_ops.models.loading import ModelSource, ModelUnavailableError, load_processor

EmbeddedBuilder = Callable[[Path], Path]
"""Builds an embedded model into the folder it is given (skipped when already built there); returns it."""
BASE_BUILDERS: dict[str, EmbeddedBuilder] = {EMBEDDED_DEFAULT: build_tiny_qwen2vl}
"""The embedded models this layer builds; the trained ones need the trainer (``rl.run.embedded_builds``
holds every builder), so code above ``rl`` passes that registry."""
TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def model_source(entry: ModelEntry, models_dir: Path, local_files_only: bool = True,
                 builders: Mapping[str, EmbeddedBuilder] = BASE_BUILDERS) -> ModelSource:
    """Where ``entry``'s weights are; embedded models are built under ``models_dir`` on first use by
    their entry in ``builders``."""
    if entry.embedded_name is not None:
        if entry.embedded_name not in builders:
            raise ModelUnavailableError(f"model {entry.key!r}: embedded model {entry.embedded_name!r} cannot be "
                                        f"built here (this caller builds {sorted(builders)})")
        location = str(builders[entry.embedded_name](Path(models_dir) / entry.embedded_name))
    else:
        location = resolved_reference(entry.source, models_dir)
    return ModelSource(location=location, trust_remote_code=entry.trust_remote_code,
                       local_files_only=local_files_only, key=entry.key, backend=entry.backend,
                       chat_template=entry.chat_template)


def check_local_model(entry: ModelEntry, models_dir: Path | None = None) -> None:
    """``ModelUnavailableError`` (one line naming the folder) when ``entry`` is a local checkpoint
    directory that cannot load: no or an unreadable ``config.json``, not a vision-language model, or
    a processor that cannot be built; with ``models_dir``, a checkpoint reference ``run_id@step`` is
    resolved first (``CheckpointNotFound`` when it names nothing). Reads the config and builds the
    processor, no weights, so commands run it before anything loads; embedded models and hub ids are
    left to the load itself."""
    source = entry.source if models_dir is None else resolved_reference(entry.source, models_dir)
    if entry.embedded_name is not None or not os.path.isdir(os.path.expanduser(source)):
        return
    key = "" if entry.key == source else entry.key  # a directory given by path is named once
    load_processor(ModelSource(location=source, trust_remote_code=entry.trust_remote_code, key=key,
                               chat_template=entry.chat_template))


def resolved_reference(source: str, models_dir: Path) -> str:
    """``source`` itself, or, when it is a training run's checkpoint ``run_id@step`` / ``run_id@latest``, its
    folder among the checkpoints beside ``models_dir`` (``CheckpointNotFound`` when it names nothing, or
    when ``source`` is a missing folder inside a run's checkpoints)."""
    ref = CheckpointRef.parse(source)
    if ref is None:
        check_checkpoint_path(source, checkpoints_dir(Path(models_dir)))
        return source
    return str(resolve_checkpoint(ref, checkpoints_dir(Path(models_dir))))
