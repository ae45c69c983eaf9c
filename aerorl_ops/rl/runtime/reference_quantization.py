"""A frozen reference quantized through bitsandbytes, with every linear layer its kernels cannot take
left in full precision.

Which layers stay in full precision is decided from each layer and its input, not from a list of
families:

- from the layer, before loading: the LM head (as transformers' own default; the fused log-prob
  path reads its weight) and, for nf4, the layers whose input width is not a whole number of 4-bit
  blocks (:func:`nf4_unfit_linears`);
- from its input, after loading: one forward of a probe prompt (one image, the model's chat
  template and processor) runs every quantized layer's kernel on the input it really gets; a layer
  whose kernel refuses it (int8 on the CPU takes 2-D / 3-D inputs only: Aya Vision's projector and
  Llama 3.2 Vision's tiles are 4-D and 5-D; nf4 on the CPU needs an output width in whole blocks of
  32), or that gets an integer input (ERNIE 4.5-VL's tower casts its pixels to its patch embedding's
  weight dtype, int8 once quantized), is named, and the reference is loaded again with those layers left
  as they are.

:func:`unquantized_linears` lists the linear layers a loaded reference holds in full precision (what a
run records).
"""

from __future__ import annotations

import gc
import logging
from dataclasses import dataclass

import torch
from bitsandbytes.nn import Linear4bit, Linear8bitLt
from PIL import Image
from transformers import BitsAndBytesConfig

from aerorl_ops.generation.prompts import chat_messages
from aerorl_ops.models.loading import LoadedVLM, ModelSource, load_vlm

logger = logging.getLogger(__name__)

QUANTIZED_LINEARS = (Linear8bitLt, Linear4bit)
NF4_BLOCK = 64
"""bitsandbytes' 4-bit block size: on the CPU an nf4 linear layer needs whole blocks of inputs."""
PROBE_IMAGE_SIZE = (224, 224)


@dataclass(frozen=True, slots=True)
class ReferenceQuantization:
    """How a reference at some ``quant_bits`` is stored: the mode label and the transformers config."""

    mode: str
    precision: str
    backend: str

    def transformers_config(self, location: str | None = None,
                            keep: tuple[str, ...] = ()) -> BitsAndBytesConfig | None:
        """The bitsandbytes config, ``keep`` (module names) left unquantized; for nf4, the linear layers of
        ``location``'s model too narrow for 4-bit blocks (``nf4_unfit_linears``) too."""
        if self.precision == "int8":
            return BitsAndBytesConfig(load_in_8bit=True, llm_int8_skip_modules=list(keep) or None)
        if self.precision == "nf4":
            narrow = nf4_unfit_linears(location) if location else []
            return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                      bnb_4bit_compute_dtype=torch.float32,
                                      llm_int8_skip_modules=[*narrow, *keep] or None)
        return None


def nf4_unfit_linears(location: str) -> list[str]:
    """What an nf4 reference of ``location``'s model keeps in full precision: its LM head (as
    transformers' own default does; the fused log-prob path reads the head's weight) and the linear
    layers whose input width is not a whole number of 4-bit blocks (tiny test models' vision towers;
    none in a real checkpoint), found on the meta device (no weights read)."""
    from transformers import AutoConfig, AutoModelForImageTextToText

    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(AutoConfig.from_pretrained(location, local_files_only=True))
    head = model.get_output_embeddings()
    return [name for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)
            and (module is head or module.in_features % NF4_BLOCK)]


def unquantized_linears(model: torch.nn.Module) -> tuple[str, ...]:
    """The names of ``model``'s linear layers that hold full-precision weights (not bitsandbytes')."""
    return tuple(name for name, module in model.named_modules()
                 if isinstance(module, torch.nn.Linear) and not isinstance(module, QUANTIZED_LINEARS))


def probe_inputs(loaded: LoadedVLM):
    """One prompt with one blank image, through ``loaded``'s chat template and processor, on its device."""
    text = loaded.processor.apply_chat_template(chat_messages("What is in the image?"), add_generation_prompt=True,
                                                tokenize=False)
    image = Image.new("RGB", PROBE_IMAGE_SIZE, (127, 127, 127))
    return loaded.on_device(loaded.processor(text=[text], images=[[image]], return_tensors="pt", padding=True))


def kernel_unfit_layers(loaded: LoadedVLM) -> dict[str, str]:
    """The quantized linear layers of ``loaded``'s model whose kernel refuses the input a probe prompt
    gives it, each with the kernel's error (one line). A refused layer returns zeros during the probe,
    so the forward goes on and every layer is tried."""
    unfit: dict[str, str] = {}
    model = loaded.model
    layers = {name: module for name, module in model.named_modules() if isinstance(module, QUANTIZED_LINEARS)}
    for name, module in layers.items():
        module.forward = _trying(name, module, unfit)
    try:
        with torch.inference_mode():
            model(**probe_inputs(loaded))
    finally:
        for module in layers.values():
            del module.forward  # the class's own again
    return unfit


def _trying(name: str, module: torch.nn.Linear, unfit: dict[str, str]):
    kernel = module.forward

    def forward(x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        if not torch.is_floating_point(x):  # the model cast its input to the quantized weight's dtype
            unfit[name] = f"its model casts its input to the quantized weight's dtype ({x.dtype})"
            return torch.zeros(*x.shape[:-1], module.out_features, device=x.device)
        try:
            return kernel(x, *args, **kwargs)
        except torch.OutOfMemoryError:
            raise
        except (RuntimeError, AssertionError) as error:  # what bitsandbytes' kernels raise on an input they refuse
            unfit[name] = f"{type(error).__name__}: {' '.join(str(error).split())} (input {tuple(x.shape)})"
            return x.new_zeros(*x.shape[:-1], module.out_features)
    return forward


def load_quantized_reference(source: ModelSource, device: torch.device, dtype: torch.dtype,
                             quantization: ReferenceQuantization) -> LoadedVLM:
    """``source``'s model quantized as ``quantization`` says, every layer whose kernel refuses its input
    (:func:`kernel_unfit_layers`) in full precision; unquantized for 16 bits."""
    location = source.location if source.is_local else None
    config = quantization.transformers_config(location)
    loaded = load_vlm(source, device, dtype=dtype, quantization_config=config)
    if config is None:
        return loaded
    unfit = kernel_unfit_layers(loaded)
    if not unfit:
        return loaded
    keep = (*unquantized_linears(loaded.model), *unfit)
    logger.info("the %s reference of %s keeps %d layer(s) in full precision, whose input its kernels refuse: %s",
                quantization.mode, source.label, len(unfit), "; ".join(f"{k}: {v}" for k, v in unfit.items()))
    del loaded
    gc.collect()
    return load_vlm(source, device, dtype=dtype, quantization_config=quantization.transformers_config(location, keep))
