"""Per-token processor outputs extended over a completion as the model's own ``generate`` extends them.

A processor output is *per-token* when its dimension 1 is the prompt length P: ``attention_mask``
[B, P], the token-type ids [B, P], Llama 3.2 Vision's ``cross_attention_mask`` [B, P, images, tiles].
``generate`` gives each generated token a value of each such input through the model's
``_update_model_kwargs_for_generation``; the trainer scores a completion with the same values, read
from the same method (one new token at a time: every completion position gets the column it writes
after the prompt), so log-probs see what the model meant at sampling time:

- PaliGemma (a prefix-LM): ``token_type_ids`` 0 is the bidirectional prefix; a completion token is 1,
  the causal suffix;
- Gemma 3: ``token_type_ids`` 1 marks image tokens; a completion token takes the last prompt token's
  type (text, 0);
- Qwen / GLM ``mm_token_type_ids``: a completion token is text, 0;
- Llama 3.2 Vision ``cross_attention_mask``: a completion token attends to the images the last prompt
  token attends to.

On top of that, a token-type input (:data:`TOKEN_TYPE_INPUTS`) gives a completion token that the
prompt types (an image placeholder a multi-turn environment wrote into the completion) the prompt's
type for it. ``labels`` (PaliGemma's processor returns its fine-tuning targets) is a target, not an
input: it is left out. A per-token output that ``generate`` does not extend has no known rule: an
error names it (:func:`check_per_token_inputs` runs before any step).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from transformers.utils import ModelOutput

TOKEN_TYPE_INPUTS = ("token_type_ids", "mm_token_type_ids")
"""Per-token type ids (PaliGemma's prefix / suffix, Gemma 3's image attention, Qwen's / GLM's multimodal rope)."""
OWN_INPUTS = ("input_ids", "attention_mask")
"""What the batch builds itself: the tokens, and 1 for a real token, 0 for padding."""
TARGETS = ("labels",)
"""Processor outputs that are training targets, not model inputs (PaliGemma's): left out of the batch."""


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


def generation_columns(model, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """What ``model``'s ``generate`` gives the next token of each per-token input of ``inputs``:
    [B, 1, ...] per name (its prompt tensor's shape, one position). A name ``generate`` does not extend
    is an error naming it (:class:`UnknownPerTokenInputError`)."""
    names = [name for name in per_token_names(inputs) if name not in TARGETS]
    length = inputs["input_ids"].shape[1]
    probe = {name: inputs[name] for name in names}
    extended = model._update_model_kwargs_for_generation(ModelOutput(), dict(probe), is_encoder_decoder=False,
                                                        num_new_tokens=1)
    unknown = [name for name in names if extended[name].shape[1] != length + 1]
    if unknown:
        raise UnknownPerTokenInputError(
            f"the processor of this {type(model).__name__} returned per-token input(s) {unknown} (dimension 1 is "
            f"the prompt length {length}) that the model's generate does not extend, so nothing says what a "
            "completion token takes; extend aerorl_ops.rl.step.per_token_inputs with a rule for it")
    return {name: extended[name][:, length:] for name in names}  # [B, 1, ...] each


def completion_values(name: str, column: torch.Tensor, prompt: torch.Tensor, prompt_ids: torch.Tensor,
                      completion_ids: torch.Tensor) -> torch.Tensor:
    """Input ``name`` over the completion: ``generate``'s ``column`` [B, 1, ...] at every completion
    position [B, C, ...]; for a token-type input, a completion token the ``prompt`` types keeps its type.

    >>> ids, types = torch.tensor([[9, 7, 2]]), torch.tensor([[0, 1, 0]])
    >>> completion_values("mm_token_type_ids", torch.tensor([[0]]), types, ids, torch.tensor([[5, 7, 5]])).tolist()
    [[0, 1, 0]]
    >>> completion_values("token_type_ids", torch.tensor([[1]]), torch.zeros(1, 3), ids, torch.tensor([[5, 5]]))
    tensor([[1, 1]])
    """
    batch, width = completion_ids.shape
    values = column.expand(batch, width, *column.shape[2:]).clone()  # [B, C, ...]
    if name in TOKEN_TYPE_INPUTS:
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
    device = prompt_ids.device
    completion_ids = completion_ids.to(device)
    return {name: torch.cat([prompt_inputs[name], completion_values(name, column, prompt_inputs[name], prompt_ids,
                                                                    completion_ids)], dim=1)  # [B, P + C, ...]
            for name, column in generation_columns(model, prompt_inputs).items()}


def check_per_token_inputs(model, prompt_inputs: Mapping[str, torch.Tensor]) -> None:
    """:class:`UnknownPerTokenInputError` naming any per-token input of ``prompt_inputs`` (a processor's
    output for a prompt) with no rule: what a run checks before its first step."""
    generation_columns(model, prompt_inputs)
