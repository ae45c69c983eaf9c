"""Load any VLM checkpoint, by hub id or local path, with transformers' Auto classes.

The embedded default goes through this same path. Policy:
- ``local_files_only`` when offline, so nothing reaches for a hub that cannot be reached;
- ``trust_remote_code`` stays off unless the model's entry in our config turns it on;
- Qwen2-VL-family checkpoints get the image-only processor (see ``image_only_processor``),
  everything else ``AutoProcessor``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor, PreTrainedModel, ProcessorMixin

from aerorl_ops.models.image_only_processor import Qwen2VLImageOnlyProcessor

IMAGE_ONLY_PROCESSORS: dict[str, type[ProcessorMixin]] = {"qwen2_vl": Qwen2VLImageOnlyProcessor}


class ModelUnavailableError(RuntimeError):
    """A model id or path that cannot be loaded on this machine."""


@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from. ``location`` is a hub id or a local directory."""

    location: str
    trust_remote_code: bool = False
    local_files_only: bool = True
    revision: str | None = None

    @property
    def is_local(self) -> bool:
        return Path(self.location).expanduser().is_dir()

    def pretrained_kwargs(self) -> dict[str, object]:
        kwargs: dict[str, object] = {
            "trust_remote_code": self.trust_remote_code,
            "local_files_only": self.local_files_only,
        }
        if self.revision:
            kwargs["revision"] = self.revision
        return kwargs


@dataclass
class LoadedVLM:
    """A model with its processor, on a device, and how long loading took."""

    model: PreTrainedModel
    processor: ProcessorMixin
    source: ModelSource
    device: torch.device
    load_seconds: float

    @property
    def tokenizer(self):
        return self.processor.tokenizer


def resolve_device(name: str) -> torch.device:
    """``auto`` is CUDA when a GPU is visible, else CPU; anything else goes to ``torch.device``."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={name!r} was asked for, but torch sees no CUDA device; use 'auto' or 'cpu'")
    return device


def load_processor(source: ModelSource) -> ProcessorMixin:
    """The processor for ``source``, with left padding for batched generation."""
    config = _load_config(source)
    processor_class = IMAGE_ONLY_PROCESSORS.get(config.model_type)
    try:
        if processor_class is not None:
            processor = processor_class.from_pretrained(source.location, **source.pretrained_kwargs())
        else:
            processor = AutoProcessor.from_pretrained(source.location, **source.pretrained_kwargs())
    except OSError as error:
        raise _unavailable(source, error) from error
    processor.tokenizer.padding_side = "left"
    return processor


def load_vlm(source: ModelSource, device: torch.device, dtype: torch.dtype = torch.float32,
             quantization_config=None) -> LoadedVLM:
    """Model and processor from ``source``; the model is put on ``device`` in eval mode."""
    started = time.perf_counter()
    processor = load_processor(source)
    kwargs = dict(source.pretrained_kwargs(), dtype=dtype)
    if quantization_config is not None:
        kwargs.update(quantization_config=quantization_config, device_map={"": device})
    try:
        model = AutoModelForImageTextToText.from_pretrained(source.location, **kwargs)
    except OSError as error:
        raise _unavailable(source, error) from error
    if quantization_config is None:
        model.to(device)
    model.eval()
    return LoadedVLM(model, processor, source, device, time.perf_counter() - started)


def _load_config(source: ModelSource):
    try:
        return AutoConfig.from_pretrained(source.location, **source.pretrained_kwargs())
    except (OSError, ValueError) as error:
        raise _unavailable(source, error) from error


def _unavailable(source: ModelSource, error: Exception) -> ModelUnavailableError:
    if source.is_local:
        hint = f"the directory {source.location!r} exists but is not a loadable checkpoint ({error})"
    elif (Path(source.location).expanduser().exists() or "/" not in source.location
          or source.location.startswith((".", "/", "~"))):
        hint = f"no checkpoint directory at {source.location!r}"
    else:
        hint = (
            f"{source.location!r} is not in the local Hugging Face cache and hub downloads are off "
            f"(local_files_only={source.local_files_only}). Download it on a machine with network access "
            f"(`huggingface-cli download {source.location}`) and copy the cache, or point the model's "
            "`source` at a local directory."
        )
    return ModelUnavailableError(f"cannot load model {source.location!r}: {hint}")

