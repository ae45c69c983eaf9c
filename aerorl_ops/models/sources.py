"""Map a configured model entry to a loadable :class:`ModelSource`."""

from __future__ import annotations

from pathlib import Path

import torch

from aerorl_ops.models.embedded_default import build_tiny_qwen2vl
from aerorl_ops.models.entry import ModelEntry
from aerorl_ops.models.loading import ModelSource

EMBEDDED_BUILDERS = {"tiny-qwen2-vl": build_tiny_qwen2vl}
TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def model_source(entry: ModelEntry, models_dir: Path, local_files_only: bool = True) -> ModelSource:
    """Where ``entry``'s weights are; embedded models are built under ``models_dir`` on first use."""
    location = entry.source
    if entry.embedded_name is not None:
        location = str(EMBEDDED_BUILDERS[entry.embedded_name](Path(models_dir) / entry.embedded_name))
    return ModelSource(location=location, trust_remote_code=entry.trust_remote_code,
                       local_files_only=local_files_only, key=entry.key, backend=entry.backend)
