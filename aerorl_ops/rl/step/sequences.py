"""Prompt + completion batches, and per-token log-probs over completion text only.

Convention (see ``aerorl_ops.losses.masking``): ``completion_mask[b, t]`` is True when token
``t`` of row ``b`` is a completion token that counts (up to and including its EOS); prompt,
padding and vision tokens are False. Log-probs are computed with the fused LM-head path over
exactly those positions, so [B, T, V] logits never exist.

The model gets every output of its processor, as ``generate`` did: ``attention_mask`` is 1 for a real
token and 0 for padding; every other per-token input (dimension 1 the prompt length: token-type ids,
Llama 3.2 Vision's ``cross_attention_mask``) is extended over the completion as the model's own
``generate`` extends it (``rl.step.per_token_inputs``: PaliGemma's completion is its causal suffix);
per-image tensors (``pixel_values``, ``image_grid_thw``, ``image_sizes``, ``pixel_attention_mask``, ...)
pass as they are. The vision mask marks the tokens the model fills with image and video features
(``LoadedVLM.vision``, traced from the model), the tokens a benchmark record counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from peft import PeftModel

from aerorl_ops.losses import TokenLogprobs, fused_token_logprobs
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.models.vision_tokens import vision_token_mask
from aerorl_ops.rl.runtime.sharding import SHARDED_SCORING
from aerorl_ops.rl.step.per_token_inputs import TARGETS, extend_per_token_inputs


class SequenceBatch(NamedTuple):
    """A left-padded prompt followed by right-padded completions, and what counts in the loss."""

    inputs: dict[str, torch.Tensor]  # model inputs: input_ids [B, T], attention_mask [B, T], pixel_values, ...
    completion_mask: torch.Tensor  # [B, T] bool, True = completion token counted in the loss
    vision_mask: torch.Tensor  # [B, T] bool, True = a token the model fills with image or video features

    @property
    def input_ids(self) -> torch.Tensor:
        return self.inputs["input_ids"]


def append_completions(prompt_inputs, completions: Sequence[Sequence[int]], loaded: LoadedVLM) -> SequenceBatch:
    """Append each row's completion ids to its (left-padded) prompt, for ``loaded``'s model.

    prompt_inputs: processor output for B prompts (input_ids [B, P], attention_mask [B, P], images);
    completions: B lists of token ids (may be empty), right-padded with the tokenizer's pad id.
    Returns a batch of length P + max(len).
    """
    prompt_ids = prompt_inputs["input_ids"]  # [B, P]
    batch, _ = prompt_ids.shape
    if len(completions) != batch:
        raise ValueError(f"{len(completions)} completions for {batch} prompts")
    width = max((len(c) for c in completions), default=0)
    completion_ids = torch.full((batch, width), loaded.tokenizer.pad_token_id, dtype=prompt_ids.dtype)  # [B, C]
    completion_valid = torch.zeros((batch, width), dtype=torch.bool)  # [B, C]
    for row, ids in enumerate(completions):
        completion_ids[row, : len(ids)] = torch.tensor(list(ids), dtype=prompt_ids.dtype)
        completion_valid[row, : len(ids)] = True
    device = prompt_ids.device
    input_ids = torch.cat([prompt_ids, completion_ids.to(device)], dim=1)  # [B, P + C]
    attention = torch.cat([prompt_inputs["attention_mask"].bool(), completion_valid.to(device)], dim=1)  # [B, P + C]
    completion_mask = torch.cat([torch.zeros_like(prompt_ids, dtype=torch.bool), completion_valid.to(device)],
                                dim=1)  # [B, P + C]
    inputs = {name: value for name, value in prompt_inputs.items() if name not in TARGETS}  # per-image as they are
    inputs.update(extend_per_token_inputs(loaded.model, prompt_inputs, completion_ids))  # [B, P + C, ...] each
    inputs.update(input_ids=input_ids, attention_mask=attention.long())
    return SequenceBatch(inputs, completion_mask, vision_token_mask(input_ids, loaded.vision.token_ids))


def final_hidden_states(model, batch: SequenceBatch) -> torch.Tensor:
    """Last hidden states of the decoder (before the LM head): [B, T, H]. A peft ``PeftModel`` (LoRA)
    is read through the model it wraps, whose layers carry the adapters."""
    inner = model.get_base_model() if isinstance(model, PeftModel) else model
    if hasattr(inner, "model"):  # transformers' VLM layout: the base model, the LM head beside it
        return inner.model(**batch.inputs, use_cache=False).last_hidden_state
    return decoder_output(inner, batch)


def decoder_output(model, batch: SequenceBatch) -> torch.Tensor:
    """[B, T, H]: the decoder's output (``get_decoder()``) of a VLM with no base model to call (Llama 4: its
    causal LM under ``language_model``), read by a hook while the whole model runs with its head on the last
    position only (``logits_to_keep=1``, not [B, T, V] logits)."""
    decoder = model.get_decoder()
    decoder = getattr(decoder, "model", decoder)  # a causal LM's (Llama 4's) own base model
    captured = []
    hook = decoder.register_forward_hook(lambda module, args, out: captured.append(out.last_hidden_state))
    try:
        model(**batch.inputs, use_cache=False, logits_to_keep=1)
    finally:
        hook.remove()
    return captured[0]


class CompletionTokens(NamedTuple):
    """Per counted completion token, flattened row-major (the order of ``x[completion_mask[:, 1:]]``)."""

    logprobs: torch.Tensor  # [N] log p(token), differentiable
    entropy: torch.Tensor  # [N] entropy of the next-token distribution, differentiable
    hidden: torch.Tensor  # [N, H] final hidden state at the position that predicts the token


def completion_tokens(model, batch: SequenceBatch, temperature: float = 1.0) -> CompletionTokens:
    """Log-prob, entropy and predicting hidden state of every counted completion token: [N], [N], [N, H]
    (:func:`fused_completion_tokens`, through a sharded policy's forward method when it has one)."""
    sharded = getattr(model.get_base_model() if isinstance(model, PeftModel) else model, SHARDED_SCORING, None)
    if sharded is not None:
        return sharded(model, batch, temperature)
    return fused_completion_tokens(model, batch, temperature)


def fused_completion_tokens(model, batch: SequenceBatch, temperature: float = 1.0) -> CompletionTokens:
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

