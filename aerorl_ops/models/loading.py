"""Load any VLM checkpoint, by hub id or local path, with transformers' Auto classes.

The embedded default goes through this same path. Policy:
- ``local_files_only`` when offline, so nothing reaches for a hub that cannot be reached;
- ``trust_remote_code`` stays off unless the model's entry in our config turns it on;
- the processor is ``AutoProcessor``'s, video processor included (``processor_files``); one that
  cannot be built is an error naming the family and what is missing;
- a model that an inference engine generates with (``backend = "vllm"``) loads its processor now
  and its transformers weights only when something asks for ``.model`` (an evaluation, say), so a
  GPU never holds the engine's copy and an idle second one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import (
    AutoConfig,
    AutoModelForImageTextToText,
    BatchFeature,
    GenerationConfig,
    PreTrainedModel,
    ProcessorMixin,
)
from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

from aerorl_ops.error_line import error_line
from aerorl_ops.models.entry import HF_GENERATION, GenerationBackend
from aerorl_ops.models.errors import ModelUnavailableError
from aerorl_ops.models.processor_files import ProcessorUnavailableError, build_processor
from aerorl_ops.models.prompt_template import use_prompt_template
from aerorl_ops.models.vision_trace import VisionTrace, trace_vision

CHECKPOINT_FILES_ERRORS = (OSError, ValueError, KeyError, TypeError, ImportError)
"""What transformers raises on checkpoint files it cannot use (missing, unreadable, of an unknown
model type, a processor that cannot be built from them, a package they need that is not installed)."""


@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from. ``location`` is a hub id or a local directory; ``key`` the
    ``[models]`` key it was configured under (for messages; empty when built by hand); ``backend``
    what generates with it; ``chat_template`` the configured chat template's text (empty: the checkpoint's
    own, ``models.prompt_template``)."""

    location: str
    trust_remote_code: bool = False
    local_files_only: bool = True
    revision: str | None = None
    key: str = ""
    backend: GenerationBackend = HF_GENERATION
    chat_template: str = ""

    @property
    def label(self) -> str:
        """How messages name the model: its key and location, or the location alone."""
        return f"{self.key!r} ({self.location})" if self.key else repr(self.location)

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
    """A model with its processor, on a device, and how long loading took.

    ``model`` is loaded on first use when ``load_model`` is given (an engine-served source), and
    that load's time is added to ``load_seconds``. ``vision`` (its vision tokens and parts) is traced on
    first use.
    """

    processor: ProcessorMixin
    source: ModelSource
    device: torch.device
    load_seconds: float
    dtype: torch.dtype = torch.float32
    loaded_model: PreTrainedModel | None = None
    load_model: Callable[[], PreTrainedModel] | None = field(default=None, repr=False)
    traced: VisionTrace | None = field(default=None, repr=False)

    @property
    def vision(self) -> VisionTrace:
        """Which tokens the model fills with image and video features, and its vision encoder and projector
        (``vision_trace``), traced once; for an engine-served model whose weights are not loaded here, on a
        copy loaded on the CPU for the trace and dropped."""
        if self.traced is None:
            if self.loaded_model is not None:
                self.traced = trace_vision(self.loaded_model, self.processor, self.source.label, self.on_device)
            else:
                cpu = torch.device("cpu")
                copy = _load_model(self.source, cpu, self.dtype, None)
                self.traced = trace_vision(copy, self.processor, self.source.label,
                                           lambda inputs: inputs.to(cpu, dtype=self.dtype))
        return self.traced

    @property
    def model(self) -> PreTrainedModel:
        if self.loaded_model is None:
            if self.load_model is None:
                raise RuntimeError(f"model {self.source.label} has no weights loaded and no way to load them")
            started = time.perf_counter()
            self.loaded_model = self.load_model()
            self.load_seconds += time.perf_counter() - started
        return self.loaded_model

    @model.setter
    def model(self, model: PreTrainedModel) -> None:  # a wrapped model (LoRA, DDP) replaces the loaded one
        self.loaded_model = model

    @property
    def tokenizer(self):
        return self.processor.tokenizer

    def on_device(self, inputs: BatchFeature) -> BatchFeature:
        """``inputs`` (the processor's output) on the model's device, their floating tensors in its dtype:
        Llama 4's processor returns bfloat16 pixel values, which a float32 tower cannot take."""
        return inputs.to(self.device, dtype=self.dtype)

    @property
    def generation_config(self) -> GenerationConfig:
        """The model's generation config (EOS ids), read from its files while the weights are not loaded."""
        if self.loaded_model is not None:
            return self.loaded_model.generation_config
        try:
            return GenerationConfig.from_pretrained(self.source.location, **self.source.pretrained_kwargs())
        except OSError:  # a checkpoint without generation_config.json: the tokenizer's EOS applies
            return GenerationConfig()


def resolve_device(name: str) -> torch.device:
    """``auto`` is CUDA when a GPU is visible, else CPU; anything else goes to ``torch.device``."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={name!r} was asked for, but torch sees no CUDA device; use 'auto' or 'cpu'")
    return device


def load_processor(source: ModelSource) -> ProcessorMixin:
    """The processor for ``source`` (see ``processor_files.build_processor``), with left padding for
    batched generation and the chat template its prompts are rendered with (``prompt_template``)."""
    config = vlm_config(source)
    try:
        processor = build_processor(source.location, config.model_type, source.pretrained_kwargs())
    except ProcessorUnavailableError as error:
        raise _unavailable(source, error) from error
    if getattr(processor, "tokenizer", None) is None:
        raise _unavailable(source, TypeError(f"the files make a {type(processor).__name__}, not a processor "
                                             "with a tokenizer (are the processor files missing?)"),
                           "its processor cannot be built")
    processor.tokenizer.padding_side = "left"
    use_prompt_template(processor, config.model_type, source.chat_template, source.label)
    return processor


def load_vlm(source: ModelSource, device: torch.device, dtype: torch.dtype = torch.float32,
             quantization_config=None) -> LoadedVLM:
    """Model and processor from ``source``; the model is put on ``device`` in eval mode (on first
    use of ``.model`` when an inference engine generates with ``source``)."""
    started = time.perf_counter()
    processor = load_processor(source)

    def load_model() -> PreTrainedModel:
        return _load_model(source, device, dtype, quantization_config)

    if source.backend.uses_engine:
        return LoadedVLM(processor, source, device, time.perf_counter() - started, dtype, load_model=load_model)
    model = load_model()
    return LoadedVLM(processor, source, device, time.perf_counter() - started, dtype, loaded_model=model)


def _load_model(source: ModelSource, device: torch.device, dtype: torch.dtype, quantization_config) -> PreTrainedModel:
    kwargs = dict(source.pretrained_kwargs(), dtype=dtype)
    if quantization_config is not None:
        kwargs.update(quantization_config=quantization_config, device_map={"": device})
    try:
        model = AutoModelForImageTextToText.from_pretrained(source.location, **kwargs)
    except CHECKPOINT_FILES_ERRORS as error:
        raise _unavailable(source, error, "its weights cannot be loaded") from error
    if quantization_config is None:
        model.to(device)
    return model.eval()


def model_config(source: ModelSource):
    """The model's transformers config (special-token ids, vision token ids), without its weights."""
    if source.is_local and not (Path(source.location).expanduser() / "config.json").is_file():
        raise _unavailable(source, FileNotFoundError("no config.json in it"))
    try:
        return AutoConfig.from_pretrained(source.location, **source.pretrained_kwargs())
    except CHECKPOINT_FILES_ERRORS as error:
        raise _unavailable(source, error, "its config.json cannot be read") from error


def vlm_config(source: ModelSource):
    """``model_config``, for a model that ``AutoModelForImageTextToText`` loads (a vision-language
    model); else ``ModelUnavailableError`` naming the model and its type. No weights are read, so
    this checks a checkpoint before anything loads."""
    config = model_config(source)
    remote = "AutoModelForImageTextToText" in (getattr(config, "auto_map", None) or {})
    if config.model_type not in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES and not remote:
        raise _unavailable(source, ValueError(f"its model_type {config.model_type!r} is not a vision-language "
                                              "model that AutoModelForImageTextToText loads"))
    return config


def _unavailable(source: ModelSource, error: Exception, what: str = "") -> ModelUnavailableError:
    if source.is_local:
        problem = f"{what}: {error_line(error)}" if what else error_line(error)
        hint = f"the directory {source.location!r} exists but is not a loadable checkpoint ({problem})"
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

