"""The only per-family code of training: which modules of a VLM are its vision encoder and its
projector, and which token ends an assistant turn, by ``config.model_type``.

- **encoder**: the vision transformer (patch embedding, blocks); **projector**: what maps its
  features into the language model's embedding space (Qwen's ``visual.merger``, Idefics3's
  ``connector``, LLaVA's / InternVL's / Gemma 3's ``multi_modal_projector``). Qwen nests its merger
  inside ``visual``: a parameter belongs to the projector when a projector name matches it, else to
  the encoder when an encoder name does.
- ``freeze_vision_tower`` freezes the **encoder only**, in every family; the projector trains unless
  ``freeze_projector`` is set too.
- LoRA never adapts the encoder, the projector or the LM head (``rl.lora``).
- The supervised target ends with the family's **end-of-turn** token (Gemma 3's ``<end_of_turn>``,
  not its ``<eos>``), what its chat template writes after an assistant reply.

A name in the table matches a module or parameter whose qualified name ends with it, or with it
followed by more (``visual`` matches ``model.visual.blocks.0.attn.qkv.weight``, also under peft's
``base_model.model.`` prefix). A family not in the table gets parts guessed from module names
(:data:`GUESSED_ENCODERS`, :data:`GUESSED_PROJECTORS`) and the tokenizer's EOS as its end of turn,
with a warning naming what was guessed.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass

import torch

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FamilyParts:
    """A family's vision encoder and projector (module or parameter names) and its end-of-turn token
    (None: the tokenizer's EOS)."""

    encoder: tuple[str, ...]
    projector: tuple[str, ...]
    end_of_turn: str | None


_QWEN = FamilyParts(("visual",), ("visual.merger",), "<|im_end|>")
_IDEFICS3 = FamilyParts(("vision_model",), ("connector",), "<end_of_utterance>")

FAMILY_PARTS: dict[str, FamilyParts] = {
    "qwen2_vl": _QWEN,
    "qwen2_5_vl": _QWEN,
    "qwen3_vl": FamilyParts(("visual",), ("visual.merger", "visual.deepstack_merger_list"), "<|im_end|>"),
    "glm4v": FamilyParts(("visual",), ("visual.merger",), "<|user|>"),  # the next turn's start ends a reply
    "idefics3": _IDEFICS3,  # SmolVLM
    "smolvlm": _IDEFICS3,  # SmolVLM2
    "gemma3": FamilyParts(("vision_tower",), ("multi_modal_projector",), "<end_of_turn>"),
    "llava_onevision": FamilyParts(("vision_tower",), ("multi_modal_projector", "image_newline"), "<|im_end|>"),
    "internvl": FamilyParts(("vision_tower",), ("multi_modal_projector",), "<|im_end|>"),
}

GUESSED_ENCODERS = ("visual", "vision_tower", "vision_model", "vision_encoder")
GUESSED_PROJECTORS = ("multi_modal_projector", "connector", "mm_projector", "merger", "mlp1")


def _matches(name: str, part: str) -> bool:
    return re.fullmatch(rf"(.*\.)?{re.escape(part)}(\..*)?", name) is not None


def _model_type(model: torch.nn.Module) -> str:
    return getattr(getattr(model, "config", None), "model_type", None) or type(model).__name__


def family_parts(model: torch.nn.Module) -> FamilyParts:
    """``model``'s row of :data:`FAMILY_PARTS`, or parts guessed from its module names (with a warning)."""
    model_type = _model_type(model)
    if model_type in FAMILY_PARTS:
        return FAMILY_PARTS[model_type]
    names = [name for name, _ in model.named_modules()]
    encoder = tuple(part for part in GUESSED_ENCODERS if any(_matches(name, part) for name in names))[:1]
    projector = tuple(part for part in GUESSED_PROJECTORS if any(_matches(name, part) for name in names))
    _warn_once(f"model type {model_type!r} is not in aerorl_ops.models.family_parts.FAMILY_PARTS; guessed its "
               f"vision encoder {encoder or 'none'}, projector {projector or 'none'} and the tokenizer's EOS as its "
               "end of turn; add a row to FAMILY_PARTS if these are wrong")
    return FamilyParts(encoder, projector, None)


@functools.cache
def _warn_once(message: str) -> None:
    logger.warning(message)


def part_of(name: str, parts: FamilyParts) -> str | None:
    """``"projector"``, ``"encoder"`` or None: which part the parameter or module ``name`` belongs to."""
    if any(_matches(name, part) for part in parts.projector):
        return "projector"
    if any(_matches(name, part) for part in parts.encoder):
        return "encoder"
    return None


def part_parameters(model: torch.nn.Module, part: str) -> dict[str, torch.nn.Parameter]:
    """``model``'s parameters in ``part`` (``"encoder"`` or ``"projector"``), by qualified name."""
    parts = family_parts(model)
    return {name: p for name, p in model.named_parameters() if part_of(name, parts) == part}


def vision_module_names(model: torch.nn.Module) -> list[str]:
    """Qualified names of the outermost modules of ``model``'s encoder and projector."""
    parts = family_parts(model)
    found = [name for name, _ in model.named_modules() if name and part_of(name, parts)]
    return [name for name in found if not any(name.startswith(outer + ".") for outer in found)]


def end_of_turn_id(model: torch.nn.Module, tokenizer) -> int:
    """The id of the token that ends an assistant turn of ``model``'s family in ``tokenizer``."""
    token = family_parts(model).end_of_turn
    if token is None:
        return tokenizer.eos_token_id
    token_id = tokenizer.convert_tokens_to_ids(token)
    if not isinstance(token_id, int) or token_id == getattr(tokenizer, "unk_token_id", None):
        raise ValueError(f"the tokenizer of this {_model_type(model)} model has no {token!r}, the token that ends "
                         "an assistant turn of its family (aerorl_ops.models.family_parts.FAMILY_PARTS); check the "
                         "checkpoint's tokenizer files")
    return token_id
