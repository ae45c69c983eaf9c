"""Per-token processor outputs extended over a completion as the model's own ``generate`` extends them.

A processor output is *per-token* when its dimension 1 is the prompt length P: ``attention_mask``
[B, P], the token-type ids [B, P], Llama 3.2 Vision's ``cross_attention_mask`` [B, P, images, tiles].
The trainer scores a completion with the values ``generate`` gave each generated token, read from the
model itself, so log-probs see what the model meant at sampling time:

- an input the model's ``_update_model_kwargs_for_generation`` extends takes the column it writes after
  the prompt, one new token at a time: PaliGemma's ``token_type_ids`` (a prefix-LM: 0 is the bidirectional
  prefix, a completion token is 1, the causal suffix), Gemma 3's ``token_type_ids`` (the last prompt
  token's type, text), Qwen's / GLM's / ERNIE's ``mm_token_type_ids`` (text, 0), Llama 3.2 Vision's
  ``cross_attention_mask`` (the images the last prompt token attends to);
- an input ``generate`` leaves out of every step after the first (it runs ``generate`` for two tokens and
  reads what the second forward got: ERNIE 4.5-VL's ``moe_mm_token_type_ids``, which routes vision tokens to
  the vision experts) is 0 over the completion: a generated token went through the model without it, as
  text.

On top of that, a token-typed input (integer [B, P], each token id of the prompt of one type: the
token-type ids above) gives a completion token that the prompt types (an image placeholder a multi-turn
environment wrote into the completion) the prompt's type for it. ``labels`` (PaliGemma's processor returns
its fine-tuning targets) is a target, not an input: it is left out. A per-token output with neither rule is
an error naming it and the model (:func:`check_per_token_inputs` runs before any step).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping

import torch
from peft import PeftModel
from transformers.utils import ModelOutput

OWN_INPUTS = ("input_ids", "attention_mask")
"""What the batch builds itself: the tokens, and 1 for a real token, 0 for padding."""
TARGETS = ("labels",)
"""Processor outputs that are training targets, not model inputs (PaliGemma's): left out of the batch."""

_LEFT_OUT_AFTER_PREFILL: weakref.WeakKeyDictionary[torch.nn.Module, frozenset[str]] = weakref.WeakKeyDictionary()
"""Per model: the per-token inputs its ``generate`` passes to the first forward only (read once per model)."""


class UnknownPerTokenInputError(ValueError):
    """A processor output is per-token and nothing says how a completion extends it."""


def per_token_names(inputs: Mapping[str, object]) -> list[str]:
    """The names of ``inputs`` whose dimension 1 is the prompt length (``input_ids``' dimension 1),
    other than ``input_ids`` and ``attention_mask``.

    >>> ids = torch.zeros(2, 5, dtype=torch.long)
    >>> per_token_names({"input_ids": ids, "attention_mask": ids, "token_type_ids": ids,
    ...                  "cross_attention_mask": torch.zeros(2, 5, 1, 4), "pixel_values": torch.zeros(2, 3, 8, 8)})
    ['token_type_ids', 'cross_attention_mask']
    """
    batch, length = inputs["input_ids"].shape
    return [name for name, value in inputs.items() if name not in OWN_INPUTS and isinstance(value, torch.Tensor)
            and value.dim() >= 2 and tuple(value.shape[:2]) == (batch, length)]


def token_typed_names(inputs: Mapping[str, torch.Tensor]) -> list[str]:
    """The per-token inputs of ``inputs`` that type the prompt's tokens: integer [B, P], and every token id
    of ``input_ids`` of one value in them.

    >>> ids = torch.tensor([[1, 7, 7, 2]])
    >>> token_typed_names({"input_ids": ids, "mm_token_type_ids": torch.tensor([[0, 1, 1, 0]]),
    ...                    "position_like": torch.tensor([[0, 1, 2, 3]]), "mask": torch.ones(1, 4, 2)})
    ['mm_token_type_ids']
    """
    ids = inputs["input_ids"]
    return [name for name in per_token_names(inputs) if inputs[name].dim() == 2
            and not torch.is_floating_point(inputs[name]) and _types_by_token(ids, inputs[name])]


def _types_by_token(ids: torch.Tensor, types: torch.Tensor) -> bool:
    pairs = torch.stack([ids.flatten(), types.flatten().to(ids.dtype)], dim=1).unique(dim=0)  # [K, 2]
    return pairs[:, 0].unique().numel() == pairs.shape[0]


def model_name(model) -> str:
    """The class name of ``model``, of the model a peft wrapper (LoRA) holds rather than the wrapper's."""
    return type(model.get_base_model() if isinstance(model, PeftModel) else model).__name__


def generation_columns(model, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """What ``model``'s ``generate`` gives the next token of each per-token input of ``inputs``:
    [B, 1, ...] per name (its prompt tensor's shape, one position). A name with no rule (module docstring)
    is an error naming it and the model (:class:`UnknownPerTokenInputError`)."""
    names = [name for name in per_token_names(inputs) if name not in TARGETS]
    length = inputs["input_ids"].shape[1]
    probe = {name: inputs[name] for name in names}
    extended = model._update_model_kwargs_for_generation(ModelOutput(), dict(probe), is_encoder_decoder=False,
                                                        num_new_tokens=1)
    columns = {name: extended[name][:, length:] for name in names if extended[name].shape[1] == length + 1}
    rest = [name for name in names if name not in columns]
    left_out = left_out_after_prefill(model, inputs, rest) if rest else frozenset()
    unknown = [name for name in rest if name not in left_out]
    if unknown:
        raise UnknownPerTokenInputError(
            f"the processor of {model_name(model)} returned per-token input(s) {unknown} (dimension 1 is the prompt "
            f"length {length}) that the model's generate neither extends nor leaves out after the prompt, so "
            "nothing says what a completion token takes; extend aerorl_ops.rl.step.per_token_inputs with a rule")
    columns.update({name: torch.zeros_like(inputs[name][:, :1]) for name in rest})  # [B, 1, ...]: as text
    return columns  # [B, 1, ...] each


def left_out_after_prefill(model, inputs: Mapping[str, torch.Tensor], names: list[str]) -> frozenset[str]:
    """Which of ``names`` ``model``'s ``generate`` passes to its first forward and to none after: read from a
    two-token ``generate`` on ``inputs`` (once per model), whose second forward gets each of them as None.
    A name ``generate`` refuses (not an input of the model) is not left out."""
    base = model.get_base_model() if isinstance(model, PeftModel) else model
    if base not in _LEFT_OUT_AFTER_PREFILL:
        seen: list[dict[str, object]] = []
        hook = base.register_forward_pre_hook(lambda module, args, kwargs: seen.append(kwargs), with_kwargs=True)
        try:
            with torch.no_grad():
                base.generate(**{name: value for name, value in inputs.items() if name not in TARGETS},
                              max_new_tokens=2, min_new_tokens=2, do_sample=False)
        except ValueError:  # generate refuses keywords the model does not take: none is left out
            seen = []
        finally:
            hook.remove()
        per_token = per_token_names(inputs)
        _LEFT_OUT_AFTER_PREFILL[base] = frozenset(
            name for name in per_token if len(seen) >= 2 and seen[0].get(name) is not None
            and seen[1].get(name) is None)
    return _LEFT_OUT_AFTER_PREFILL[base] & frozenset(names)


def completion_values(column: torch.Tensor, prompt: torch.Tensor | None, prompt_ids: torch.Tensor,
                      completion_ids: torch.Tensor) -> torch.Tensor:
    """An input over the completion: ``generate``'s ``column`` [B, 1, ...] at every completion position
    [B, C, ...]; for a token-typed input (``prompt`` its values [B, P], else None), a completion token the
    prompt types keeps its type.

    >>> ids, types = torch.tensor([[9, 7, 2]]), torch.tensor([[0, 1, 0]])
    >>> completion_values(torch.tensor([[0]]), types, ids, torch.tensor([[5, 7, 5]])).tolist()
    [[0, 1, 0]]
    >>> completion_values(torch.tensor([[1]]), None, ids, torch.tensor([[5, 5]]))
    tensor([[1, 1]])
    """
    batch, width = completion_ids.shape
    values = column.expand(batch, width, *column.shape[2:]).clone()  # [B, C, ...]
    if prompt is not None:
        for token, kind in token_types(prompt_ids, prompt).items():
            values[completion_ids == token] = kind
    return values


def token_types(ids: torch.Tensor, types: torch.Tensor) -> dict[int, int]:
    """Every token id that ``types`` (the same shape as ``ids``) gives a non-zero type, with its type.

    >>> token_types(torch.tensor([[1, 7, 7, 2]]), torch.tensor([[0, 1, 1, 0]]))
    {7: 1}
    """
    typed = types != 0
    return {int(token): int(kind) for token, kind in zip(ids[typed].tolist(), types[typed].tolist(), strict=True)}


def extend_per_token_inputs(model, prompt_inputs: Mapping[str, torch.Tensor],
                            completion_ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each per-token input of ``prompt_inputs`` [B, P, ...] followed by its values over
    ``completion_ids`` [B, C]: [B, P + C, ...] by name (targets left out)."""
    prompt_ids = prompt_inputs["input_ids"]  # [B, P]
    completion_ids = completion_ids.to(prompt_ids.device)
    typed = token_typed_names(prompt_inputs)
    return {name: torch.cat([prompt_inputs[name], completion_values(
        column, prompt_inputs[name] if name in typed else None, prompt_ids, completion_ids)], dim=1)  # [B, P + C, ...]
            for name, column in generation_columns(model, prompt_inputs).items()}


def check_per_token_inputs(model, prompt_inputs: Mapping[str, torch.Tensor]) -> None:
    """:class:`UnknownPerTokenInputError` naming any per-token input of ``prompt_inputs`` (a processor's
    output for a prompt) with no rule: what a run checks before its first step."""
    generation_columns(model, prompt_inputs)
