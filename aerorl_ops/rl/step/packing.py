"""Packed sequences ("remove padding", verl's ``use_remove_padding``): a batch's rows as one row of real tokens.

A :class:`~aerorl_ops.rl.step.sequences.SequenceBatch` is left-padded prompts followed by right-padded
completions, so a micro-batch of rows of very different lengths is mostly padding that every layer computes.
Packed, its rows' real tokens (``attention_mask`` 1) follow each other in one row of ``M`` tokens, row-major,
and the model is told where each sequence starts by its position ids, which restart at 0 for every
sequence, with no attention mask: transformers then keeps attention inside each sequence (sdpa and eager: a
block-diagonal causal mask from the packed positions, ``masking_utils.find_packed_sequence_indices``; flash
attention and ``rl.step.varlen_attention``: sequence boundaries from the same positions).

- Positions: each sequence's text positions ``0 .. length - 1``. A multimodal-rope model (Qwen2-VL, Qwen2.5-VL,
  Qwen3-VL, GLM-4.1V: the base model has ``compute_3d_position_ids``) gets ``[4, 1, M]``: the text positions
  (which transformers reads to find the sequences) and the model's own 3-D positions, computed by that method
  on the padded batch, as the padded forward computes them, and read at the real tokens.
- Per-token inputs (``mm_token_type_ids``, ``token_type_ids``, ...: dimension 1 is the batch's length) are
  packed like the tokens; per-image inputs (``pixel_values``, ``image_grid_thw``, ...) pass as they are: the
  model places image features by its image tokens, in row-major order, which packing keeps.

Every counted token's predicting state is read back from the packed row in row-major order, the order of
``x[completion_mask[:, 1:]]``, so what comes out is what the padded path gives (``CompletionTokens``).
"""

from __future__ import annotations

import inspect
from typing import NamedTuple

import torch

from aerorl_ops.rl.step.per_token_inputs import OWN_INPUTS, per_token_names
from aerorl_ops.rl.step.sequences import PredictingRows, SequenceBatch, model_hidden_states, scoring_model

ROPE_INDEX_METHOD = "compute_3d_position_ids"
"""A multimodal-rope base model's own method for its 3-D positions (transformers' Qwen-VL and GLM-4V families)."""


class PackedSequences(NamedTuple):
    """A batch's rows packed into one row of ``M`` real tokens."""

    inputs: dict[str, torch.Tensor]  # input_ids [1, M], position_ids [1, M] or [4, 1, M], per-token [1, M, ...]
    index: torch.Tensor  # [B, T] long: each real token's place in the packed row, -1 at padding


def contiguous_rows(real: torch.Tensor) -> bool:
    """Whether each row's real tokens (``real`` [B, T] bool) are one run, as a left-padded prompt followed by a
    right-padded completion makes them: a row with a gap cannot be packed without moving its tokens.

    >>> contiguous_rows(torch.tensor([[0, 1, 1, 0], [1, 1, 1, 1]]).bool())
    True
    >>> contiguous_rows(torch.tensor([[1, 0, 1, 0]]).bool())
    False
    """
    starts = real[:, :1].long() + (real[:, 1:] & ~real[:, :-1]).long().sum(dim=1, keepdim=True)  # [B, 1]
    return bool((starts <= 1).all())


def sequence_positions(real: torch.Tensor) -> torch.Tensor:
    """[B, T] bool real tokens -> [M] each real token's position in its own sequence, row-major.

    >>> sequence_positions(torch.tensor([[0, 1, 1], [1, 1, 1]]).bool()).tolist()
    [0, 1, 0, 1, 2]
    """
    return (real.long().cumsum(dim=1) - 1)[real]  # [M]


def rope_index_owner(model) -> torch.nn.Module | None:
    """The module of ``model`` (a transformers VLM, under peft's wrapper or not) that computes its 3-D rope
    positions (``ROPE_INDEX_METHOD``), or None for a model with 1-D positions."""
    inner = scoring_model(model)
    return next((part for part in (inner, getattr(inner, "model", None))
                 if part is not None and hasattr(part, ROPE_INDEX_METHOD)), None)


def padded_rope_positions(owner: torch.nn.Module, batch: SequenceBatch) -> torch.Tensor | None:
    """The 3-D positions [3, B, T] ``owner``'s own ``compute_3d_position_ids`` gives the padded batch (what its
    forward computes when it is given no position ids); None where it gives none (no images: 1-D positions)."""
    method = getattr(owner, ROPE_INDEX_METHOD)
    fixed = {"input_ids": batch.input_ids, "inputs_embeds": None, "cache": None}
    return method(**{name: fixed[name] if name in fixed else batch.inputs.get(name)
                     for name in inspect.signature(method).parameters})


def packed_positions(model, batch: SequenceBatch, real: torch.Tensor) -> torch.Tensor:
    """Position ids of the packed row: [1, M] each sequence from 0, or [4, 1, M] for a multimodal-rope model
    (those text positions, then its own 3-D positions at the real tokens)."""
    text = sequence_positions(real)[None]  # [1, M]
    owner = rope_index_owner(model)
    if owner is None:
        return text
    rope = padded_rope_positions(owner, batch)  # [3, B, T] or None
    spatial = text.expand(3, -1) if rope is None else rope[:, real]  # [3, M]
    return torch.cat([text, spatial], dim=0)[:, None, :]  # [4, 1, M]


def pack_sequences(model, batch: SequenceBatch) -> PackedSequences:
    """``batch``'s rows packed into one row for ``model`` (module docstring). ValueError when a row's real
    tokens are not one run (:func:`contiguous_rows`)."""
    real = batch.inputs["attention_mask"].bool()  # [B, T]
    if not contiguous_rows(real):
        raise ValueError("a row of this batch has padding between its tokens; only left-padded prompts followed "
                         "by right-padded completions can be packed")
    per_token = per_token_names(batch.inputs)
    inputs = {name: value for name, value in batch.inputs.items() if name not in (*OWN_INPUTS, *per_token)}
    inputs.update({name: batch.inputs[name][real][None] for name in per_token})  # [1, M, ...] each
    inputs["input_ids"] = batch.input_ids[real][None]  # [1, M]
    inputs["position_ids"] = packed_positions(model, batch, real)  # [1, M] or [4, 1, M]
    index = torch.full(real.shape, -1, dtype=torch.long, device=real.device)  # [B, T]
    index[real] = torch.arange(int(real.sum()), device=real.device)
    return PackedSequences(inputs, index)


def packed_rows(model, batch: SequenceBatch) -> PredictingRows:
    """The states predicting ``batch``'s counted completion tokens, from one forward of its packed rows:
    [N, H] and [N] targets, in the order of the padded path's ``hidden[:, :-1][completion_mask[:, 1:]]``."""
    packed = pack_sequences(model, batch)
    hidden = model_hidden_states(model, packed.inputs)[0]  # [M, H]
    counted = batch.completion_mask[:, 1:]  # [B, T-1]: the token after position t counts
    rows = packed.index[:, :-1][counted]  # [N] packed place of each predicting position
    if rows.numel() and int(rows.min()) < 0:
        raise ValueError("a counted completion token follows a padding position; its row cannot be packed")
    return PredictingRows(hidden[rows], batch.input_ids[:, 1:][counted])  # [N, H], [N]


def token_counts(batch: SequenceBatch) -> tuple[int, int]:
    """(real tokens, padded positions) of ``batch``: what a packed and a padded forward process."""
    attention = batch.inputs["attention_mask"]  # [B, T]
    return int(attention.sum()), attention.numel()
