"""Prompt + completion batches, and per-token log-probs over completion text only.

Convention (see ``aerorl_ops.losses.masking``): ``completion_mask[b, t]`` is True when token
``t`` of row ``b`` is a completion token that counts (up to and including its EOS); prompt,
padding and vision tokens are False. Log-probs are computed with the fused LM-head path over
exactly those positions, so [B, T, V] logits never exist.

The model gets every output of its processor, as ``generate`` did: per-token tensors are extended
over the completion as each means (``attention_mask``: 1 for a real token, 0 for padding; the
token-type ids ``token_type_ids`` / ``mm_token_type_ids``: 0, text, except at a token the prompt gives
a type, an image placeholder that a multi-turn environment wrote into the completion), per-image tensors
(``pixel_values``, ``image_grid_thw``, ``image_sizes``, ``pixel_attention_mask``, ...) pass as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from peft import PeftModel

from aerorl_ops.losses import TokenLogprobs, fused_token_logprobs
from aerorl_ops.models.vision_tokens import vision_token_mask

TOKEN_TYPE_INPUTS = ("token_type_ids", "mm_token_type_ids")
"""Per-token type ids (Gemma 3's image attention, Qwen's / GLM's multimodal rope): completion tokens are text, 0."""


class SequenceBatch(NamedTuple):
    """A left-padded prompt followed by right-padded completions, and what counts in the loss."""

    inputs: dict[str, torch.Tensor]  # model inputs: input_ids [B, T], attention_mask [B, T], pixel_values, ...
    completion_mask: torch.Tensor  # [B, T] bool, True = completion token counted in the loss
    vision_mask: torch.Tensor  # [B, T] bool, True = vision placeholder token

    @property
    def input_ids(self) -> torch.Tensor:
        return self.inputs["input_ids"]


def token_types(ids: torch.Tensor, types: torch.Tensor) -> dict[int, int]:
    """Every token id that ``types`` (the same shape as ``ids``) gives a non-zero type, with its type.

    >>> token_types(torch.tensor([[1, 7, 7, 2]]), torch.tensor([[0, 1, 1, 0]]))
    {7: 1}
    """
    typed = types != 0
    return {int(token): int(kind) for token, kind in zip(ids[typed].tolist(), types[typed].tolist(), strict=True)}


def append_completions(prompt_inputs, completions: Sequence[Sequence[int]], pad_token_id: int,
                       model_config) -> SequenceBatch:
    """Append each row's completion ids to its (left-padded) prompt.

    prompt_inputs: processor output for B prompts (input_ids [B, P], attention_mask [B, P], images);
    completions: B lists of token ids (may be empty). Returns a batch of length P + max(len).
    """
    prompt_ids = prompt_inputs["input_ids"]  # [B, P]
    batch, _ = prompt_ids.shape
    if len(completions) != batch:
        raise ValueError(f"{len(completions)} completions for {batch} prompts")
    width = max((len(c) for c in completions), default=0)
    completion_ids = torch.full((batch, width), pad_token_id, dtype=prompt_ids.dtype)  # [B, C]
    completion_valid = torch.zeros((batch, width), dtype=torch.bool)  # [B, C]
    for row, ids in enumerate(completions):
        completion_ids[row, : len(ids)] = torch.tensor(list(ids), dtype=prompt_ids.dtype)
        completion_valid[row, : len(ids)] = True
    device = prompt_ids.device
    input_ids = torch.cat([prompt_ids, completion_ids.to(device)], dim=1)  # [B, P + C]
    attention = torch.cat([prompt_inputs["attention_mask"].bool(), completion_valid.to(device)], dim=1)  # [B, P + C]
    completion_mask = torch.cat([torch.zeros_like(prompt_ids, dtype=torch.bool), completion_valid.to(device)],
                                dim=1)  # [B, P + C]
    inputs = dict(prompt_inputs)  # per-image tensors as they are
    inputs.update(input_ids=input_ids, attention_mask=attention.long())
    for name, value in prompt_inputs.items():
        if name in TOKEN_TYPE_INPUTS:
            types = torch.zeros_like(completion_ids)  # [B, C] text, but for the prompt's typed tokens (images)
            for token, kind in token_types(prompt_ids, value).items():
                types[completion_ids == token] = kind
            inputs[name] = torch.cat([value, types.to(device)], dim=1)  # [B, P + C]
        elif name not in ("input_ids", "attention_mask") and name.endswith(("_ids", "_mask")) \
                and getattr(value, "shape", None) == prompt_ids.shape:
            raise ValueError(f"the processor returned a per-token input {name!r} [B, P] that append_completions "
                             "does not know how to extend over the completion; add it to "
                             "aerorl_ops.rl.sequences.TOKEN_TYPE_INPUTS if completion tokens take 0, or extend "
                             "append_completions")
    return SequenceBatch(inputs, completion_mask, vision_token_mask(input_ids, model_config))


def final_hidden_states(model, batch: SequenceBatch) -> torch.Tensor:
    """Last hidden states of the decoder (before the LM head): [B, T, H]. A peft ``PeftModel`` (LoRA)
    is read through the model it wraps, whose layers carry the adapters."""
    inner = model.get_base_model() if isinstance(model, PeftModel) else model
    return inner.model(**batch.inputs, use_cache=False).last_hidden_state


class CompletionTokens(NamedTuple):
    """Per counted completion token, flattened row-major (the order of ``x[completion_mask[:, 1:]]``)."""

    logprobs: torch.Tensor  # [N] log p(token), differentiable
    entropy: torch.Tensor  # [N] entropy of the next-token distribution, differentiable
    hidden: torch.Tensor  # [N, H] final hidden state at the position that predicts the token


def completion_tokens(model, batch: SequenceBatch, temperature: float = 1.0) -> CompletionTokens:
    """Log-prob, entropy and predicting hidden state of every counted completion token: [N], [N], [N, H].

    Hidden state ``t`` predicts token ``t + 1``, so position ``t`` counts when token ``t + 1`` is
    a counted completion token.
    """
    hidden = final_hidden_states(model, batch)[:, :-1]  # [B, T-1, H]
    counted = batch.completion_mask[:, 1:]  # [B, T-1]
    head = model.get_output_embeddings()
    scored = fused_token_logprobs(
        hidden,  # [B, T-1, H]
        head.weight,  # [V, H]
        batch.input_ids[:, 1:],  # [B, T-1]
        counted,  # [B, T-1]
        temperature=temperature,
        lm_head_bias=getattr(head, "bias", None),
    )
    return CompletionTokens(scored.logprobs, scored.entropy, hidden[counted])  # [N], [N], [N, H]


def completion_logprobs(model, batch: SequenceBatch, temperature: float = 1.0) -> TokenLogprobs:
    """Log-prob and entropy of every counted completion token, flattened row-major: [N] each."""
    tokens = completion_tokens(model, batch, temperature)
    return TokenLogprobs(tokens.logprobs, tokens.entropy)

