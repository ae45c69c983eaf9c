"""Which tokens a VLM fills with image and video features, and which of its modules compute them: read from
the model itself, once per model, by running a probe prompt through its own forward.

The probe is one prompt with one image (and, where the processor takes video, one with a short video),
through the model's chat template and processor. While it runs:

- **the filled positions** are those of every feature scatter: ``inputs_embeds.masked_scatter(mask, features)``
  into the [B, T, H] embeddings (how 87 of transformers' 100 image-text-to-text families place their features)
  and ``inputs_embeds[mask] = ...`` (Ovis2's visual indicator tokens), caught by a ``TorchFunctionMode``. Their
  token ids are the model's vision tokens: Qwen's ``<|image_pad|>``, Ovis2's ``<IMG_ATOM>`` (its processor's
  ``<image>`` never reaches the model) and grid markers, InternVL's ``<IMG_CONTEXT>`` (not its ``<img>``
  delimiters, which are text). A model that scatters nothing but runs a vision path reads its images by
  cross-attention (Llama 3.2 Vision): its processor's image token marks where, and is counted. A model with
  neither is an error naming it, never a count of 0.
- **the vision modules** are those that run on the images: from the first call that takes the pixels (the
  model's ``get_image_features`` / ``get_video_features``, or a module given the pixel tensor) until the last
  feature scatter, the input embedding left out. The first outermost one is the **encoder** (it takes the
  pixels); every later outermost one is the **projector** (LLaVA's ``multi_modal_projector``, Gemma 4's
  ``embed_vision``, ERNIE's ``resampler_model``, Llama 4's projector that runs after ``get_image_features``
  returns), with the parameters used there outside any module (LLaVA-NeXT's ``image_newline``) and, inside the
  encoder, each child that maps another width to the language model's (Qwen's ``merger``, Qwen3-VL's
  ``deepstack_merger_list``).

The forward stops where the decoder starts: nothing after the features is needed. ``family_parts.FAMILY_PARTS``
overrides the traced parts for a family whose trace is wrong.
"""

from __future__ import annotations

import inspect
import logging
import re
from dataclasses import dataclass, field

import torch
from peft import PeftModel
from PIL import Image
from torch.overrides import TorchFunctionMode

from aerorl_ops.error_line import error_line
from aerorl_ops.models.family_parts import FAMILY_PARTS, FamilyParts
from aerorl_ops.models.video_input import video_kwargs
from aerorl_ops.models.vision_tokens import UnknownVisionTokensError, processor_image_token_ids

logger = logging.getLogger(__name__)

PROBE_IMAGE_SIZE = (224, 224)
PROBE_FRAMES = 4
PROBE_QUESTION = "What is in the image?"
FEATURE_CALLS = ("get_image_features", "get_video_features")
SCATTERS = (torch.Tensor.masked_scatter, torch.Tensor.masked_scatter_, torch.masked_scatter)


@dataclass(frozen=True)
class VisionTrace:
    """What a model's probe showed: the ids of its vision tokens, and its vision encoder and projector."""

    token_ids: tuple[int, ...]
    parts: FamilyParts
    how: str  # "feature scatter", or "cross-attention (the processor's image token)"


FRAME_CAP = "cap_pixels_per_frame"
"""A Qwen-VL video processor's switch for qwen-vl-utils' per-frame pixel cap (transformers 5.2x)."""


class VisionTraceError(ValueError):
    """The probe prompt could not run through the model's vision path; one line naming the model."""


def probe_inputs(processor, video: bool = False) -> dict[str, torch.Tensor]:
    """One prompt with one blank image (or, with ``video``, a short blank video), through ``processor``'s chat
    template."""
    part = {"type": "video"} if video else {"type": "image"}
    messages = [{"role": "user", "content": [part, {"type": "text", "text": PROBE_QUESTION}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    image = Image.new("RGB", PROBE_IMAGE_SIZE, (127, 127, 127))
    media = video_kwargs([[image] * PROBE_FRAMES], [1.0]) if video else {"images": [[image]]}
    if video and FRAME_CAP in inspect.signature(processor.video_processor._preprocess).parameters:
        media[FRAME_CAP] = False  # the probe's 4 frames of 224 px are under any cap; said, it silences the
        # warning transformers logs at the first video a Qwen-VL processor sees (every run's probe, video or not)
    return processor(text=[text], **media, return_tensors="pt", padding=True)


def trace_vision(model: torch.nn.Module, processor, label: str, on_device) -> VisionTrace:
    """``model``'s :class:`VisionTrace` (module docstring), ``processor`` making the probe, ``on_device`` putting
    it on the model's device and dtype; ``label`` names the model in errors."""
    base = model.get_base_model() if isinstance(model, PeftModel) else model
    probes = [_run(base, on_device(probe_inputs(processor)), label, "image")]
    if getattr(processor, "video_processor", None) is not None:
        try:
            probes.append(_run(base, on_device(probe_inputs(processor, video=True)), label, "video"))
        except (VisionTraceError, ValueError, TypeError) as error:  # the chat template or processor refuses a video
            logger.warning("%s: its video tokens are not known (a probe prompt with a video could not run: %s); its "
                           "image tokens are", label, error_line(error))
    filled = sorted({token for probe in probes for token in probe.filled_ids})
    how = "feature scatter"
    if not filled and probes[0].modules:
        filled, how = list(processor_image_token_ids(processor, label)), "cross-attention (the processor's image token)"
    if not filled:
        raise UnknownVisionTokensError(
            f"cannot tell which tokens of {label} are vision tokens: a probe prompt with an image ran through "
            f"{type(base).__name__} and no module took its pixels nor was any feature scattered into its embeddings")
    model_type = getattr(base.config, "model_type", "")
    parts = FAMILY_PARTS.get(model_type) or probes[0].parts(_width(base))
    return VisionTrace(tuple(filled), parts, how)


def filled_mask(model: torch.nn.Module, inputs, label: str = "the model") -> torch.Tensor:
    """[B, T] bool: the positions of ``inputs`` (a processor's output, on the model's device) that ``model``'s
    forward scatters image or video features into, read while it runs (stopped where the decoder starts).
    What ``VisionTrace.token_ids`` stand for, on any batch."""
    base = model.get_base_model() if isinstance(model, PeftModel) else model
    probe = _run(base, inputs, label, "image")
    filled = torch.zeros_like(probe.input_ids, dtype=torch.bool, device="cpu")  # [B, T]
    for _, mask in probe.scatters:
        filled |= mask
    return filled


@dataclass
class _Call:
    name: str
    start: int
    in_width: int | None
    out_width: int | None = None


@dataclass
class _Probe:
    """One probe's record: the module calls, the feature scatters, the parameters used, in call order."""

    input_ids: torch.Tensor
    pixels: tuple[torch.Tensor, ...]
    module_names: dict[int, str]
    parameter_names: dict[int, str]
    excluded: tuple[str, ...]
    clock: int = 0
    opened: int | None = None
    calls: list[_Call] = field(default_factory=list)
    scatters: list[tuple[int, torch.Tensor]] = field(default_factory=list)
    parameters: list[tuple[int, str]] = field(default_factory=list)

    def tick(self) -> int:
        self.clock += 1
        return self.clock

    def open(self) -> None:
        if self.opened is None:
            self.opened = self.tick()

    @property
    def closed(self) -> int:
        return self.scatters[-1][0] if self.scatters else self.clock

    @property
    def filled_ids(self) -> set[int]:
        filled = torch.zeros(self.input_ids.shape, dtype=torch.bool)  # [B, T]
        for _, mask in self.scatters:
            filled |= mask
        return set(self.input_ids.cpu()[filled].tolist())

    @property
    def modules(self) -> list[_Call]:
        """The calls in the window (module docstring), outermost first, in call order."""
        if self.opened is None:
            return []
        inside = [call for call in self.calls if self.opened <= call.start <= self.closed
                  and not any(_within(call.name, name) for name in self.excluded)]
        return [call for call in inside if not any(_within(call.name, other.name) and call.name != other.name
                                                   for other in inside)]

    def parts(self, width: int) -> FamilyParts:
        outermost = self.modules
        if not outermost:
            return FamilyParts((), ())
        encoder = outermost[0].name
        later = [call.name for call in outermost[1:] if call.name != encoder]
        nested = [call.name for call in self.calls if _is_child(call.name, encoder) and call.out_width == width
                  and call.in_width not in (None, width)]
        loose = [name for start, name in self.parameters if self.opened <= start <= self.closed
                 and not any(_within(name, module) for module in (encoder, *later, *self.excluded))]
        return FamilyParts((encoder,), tuple(dict.fromkeys([*later, *_outermost(nested), *loose])))


def _run(model: torch.nn.Module, inputs, label: str, kind: str) -> _Probe:
    """``inputs`` through ``model`` with the hooks that fill a :class:`_Probe`, stopped where the decoder starts."""
    embedding = model.get_input_embeddings()
    names = {id(module): name for name, module in model.named_modules()}
    decoder = model.get_decoder()
    language = [names[id(embedding)], names.get(id(decoder), "")]
    probe = _Probe(inputs["input_ids"], tuple(value for key, value in inputs.items() if key.startswith("pixel_values")),
                   names, {id(p): name for name, p in model.named_parameters()}, (names[id(embedding)],))
    handles = [decoder.register_forward_pre_hook(_stop)] if decoder is not model else []
    for name, module in model.named_modules():
        if name and not any(_within(outer, name) for outer in language):  # not the language model or what holds it
            handles.append(module.register_forward_pre_hook(_entering(probe, name), with_kwargs=True))
            handles.append(module.register_forward_hook(_leaving(probe)))
    wrapped = _wrap_feature_calls(model, probe)
    try:
        with torch.no_grad(), _Watch(probe):
            model(**inputs, use_cache=False)
    except _DecoderReached:
        pass
    except Exception as error:
        raise VisionTraceError(f"cannot trace the vision path of {label}: a probe prompt with an {kind} failed in "
                               f"{type(model).__name__} ({type(error).__name__}: {error_line(error)})") from error
    finally:
        for handle in handles:
            handle.remove()
        for module in wrapped:
            for call in FEATURE_CALLS:
                module.__dict__.pop(call, None)
    return probe


class _DecoderReached(Exception):
    """Raised where the decoder starts: the probe has seen every feature."""


def _stop(module, args):
    raise _DecoderReached


def _entering(probe: _Probe, name: str):
    def hook(module, args, kwargs):
        if any(value is pixels for value in (*args, *kwargs.values()) for pixels in probe.pixels):
            probe.open()
        probe.calls.append(_Call(name, probe.tick(), _first_width((*args, *kwargs.values()))))
    return hook


def _leaving(probe: _Probe):
    def hook(module, args, output):
        name = probe.module_names[id(module)]
        call = next(call for call in reversed(probe.calls) if call.name == name)
        call.out_width = _first_width((output,))
    return hook


def _wrap_feature_calls(model: torch.nn.Module, probe: _Probe) -> list[torch.nn.Module]:
    """Open the probe's window when any module's ``get_image_features`` / ``get_video_features`` is called."""
    wrapped = []
    for module in model.modules():
        for call in FEATURE_CALLS:
            method = getattr(module, call, None)
            if callable(method):
                module.__dict__[call] = _opening(probe, method)
                wrapped.append(module)
    return wrapped


def _opening(probe: _Probe, method):
    def call(*args, **kwargs):
        probe.open()
        return method(*args, **kwargs)
    return call


class _Watch(TorchFunctionMode):
    """Records the feature scatters into [B, T, H] tensors, and the parameters every torch call uses."""

    def __init__(self, probe: _Probe):
        super().__init__()
        self.probe = probe

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in SCATTERS:
            self._scatter(args[0], args[1] if len(args) > 1 else kwargs.get("mask"))
        elif func is torch.Tensor.__setitem__ and isinstance(args[1], torch.Tensor) and args[1].dtype == torch.bool:
            self._scatter(args[0], args[1])
        if self.probe.opened is not None:
            for value in (*args, *kwargs.values()):
                if isinstance(value, torch.nn.Parameter) and id(value) in self.probe.parameter_names:
                    self.probe.parameters.append((self.probe.clock, self.probe.parameter_names[id(value)]))
        return func(*args, **kwargs)

    def _scatter(self, target, mask) -> None:
        shape = tuple(self.probe.input_ids.shape)
        if not isinstance(target, torch.Tensor) or target.dim() != 3 or tuple(target.shape[:2]) != shape:
            return
        mask = mask if mask.dim() == 2 else mask.any(dim=-1)  # [B, T]
        if tuple(mask.shape) == shape:
            self.probe.scatters.append((self.probe.tick(), mask.to("cpu", torch.bool)))


def _first_width(values) -> int | None:
    """The last dimension of the first tensor in ``values`` (through tuples, lists and model outputs)."""
    for value in values:
        if isinstance(value, torch.Tensor):
            return value.shape[-1] if value.dim() else None
        inner = value.values() if isinstance(value, dict) else value if isinstance(value, (tuple, list)) else ()
        width = _first_width(inner)
        if width is not None:
            return width
    return None


def _width(model: torch.nn.Module) -> int:
    """The language model's width: what its input embedding gives a token."""
    return model.get_input_embeddings().weight.shape[-1]


def _within(name: str, outer: str) -> bool:
    return name == outer or name.startswith(outer + ".")


def _is_child(name: str, parent: str) -> bool:
    """``name`` is a child of ``parent``, or a child of a container child of it (``parent.blocks.0``)."""
    return re.fullmatch(rf"{re.escape(parent)}\.[^.]+(\.\d+)?", name) is not None


def _outermost(names: list[str]) -> list[str]:
    return [name for name in names if not any(_within(name, other) and name != other for other in names)]
