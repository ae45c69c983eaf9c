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
pass as they are. The vision mask marks the processor's vision tokens (``models.vision_tokens``), the
tokens a benchmark record counts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
from peft import PeftModel

from aerorl_ops.losses import TokenLogprobs, fused_token_logprobs
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.models.vision_tokens import vision_token_ids, vision_token_mask
from aerorl_ops.rl.runtime.sharding import SCORING_METHOD
from aerorl_ops.rl.step.per_token_inputs import TARGETS, extend_per_token_inputs


class SequenceBatch(NamedTuple):
    """A left-padded prompt followed by right-padded completions, and what counts in the loss."""

    inputs: dict[str, torch.Tensor]  # model inputs: input_ids [B, T], attention_mask [B, T], pixel_values, ...
    completion_mask: torch.Tensor  # [B, T] bool, True = completion token counted in the loss
    vision_mask: torch.Tensor  # [B, T] bool, True = one of the processor's vision tokens

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
    vision_ids = vision_token_ids(loaded.processor, loaded.source.label)
    return SequenceBatch(inputs, completion_mask, vision_token_mask(input_ids, vision_ids))


def scoring_model(model) -> torch.nn.Module:
    """The transformers model a peft ``PeftModel`` (LoRA) wraps, whose layers carry the adapters; else ``model``."""
    return model.get_base_model() if isinstance(model, PeftModel) else model


def model_hidden_states(model, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """Last hidden states of the decoder (before the LM head) on model ``inputs``: [B, T, H]."""
    inner = scoring_model(model)
    if hasattr(inner, "model"):  # transformers' VLM layout: the base model, the LM head beside it
        return inner.model(**inputs, use_cache=False).last_hidden_state
    return decoder_output(inner, inputs)


def final_hidden_states(model, batch: SequenceBatch) -> torch.Tensor:
    """Last hidden states of the decoder (before the LM head) on ``batch``: [B, T, H]."""
    return model_hidden_states(model, batch.inputs)


def decoder_output(model, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """[B, T, H]: the decoder's output (``get_decoder()``) of a VLM with no base model to call (Llama 4: its
    causal LM under ``language_model``), read by a hook while the whole model runs with its head on the last
    position only (``logits_to_keep=1``, not [B, T, V] logits)."""
    decoder = model.get_decoder()
    decoder = getattr(decoder, "model", decoder)  # a causal LM's (Llama 4's) own base model
    captured = []
    hook = decoder.register_forward_hook(lambda module, args, out: captured.append(out.last_hidden_state))
    try:
        model(**inputs, use_cache=False, logits_to_keep=1)
    finally:
        hook.remove()
    return captured[0]


class PredictingRows(NamedTuple):
    """The states that predict a batch's counted completion tokens, and those tokens, row-major (the order of
    ``x[completion_mask[:, 1:]]``)."""

    hidden: torch.Tensor  # [N, H] final hidden state at the position that predicts each token
    targets: torch.Tensor  # [N] the tokens


def padded_rows(model, batch: SequenceBatch) -> PredictingRows:
    """The states predicting ``batch``'s counted completion tokens from one forward of its padded rows, and the
    tokens: [N, H], [N]. Hidden state ``t`` predicts token ``t + 1``, so position ``t`` counts when token
    ``t + 1`` is a counted completion token."""
    hidden = final_hidden_states(model, batch)[:, :-1]  # [B, T-1, H]
    counted = batch.completion_mask[:, 1:]  # [B, T-1]
    return PredictingRows(hidden[counted], batch.input_ids[:, 1:][counted])  # [N, H], [N]


class CompletionTokens(NamedTuple):
    """Per counted completion token, flattened row-major (the order of ``x[completion_mask[:, 1:]]``)."""

    logprobs: torch.Tensor  # [N] log p(token), differentiable
    entropy: torch.Tensor  # [N] entropy of the next-token distribution, differentiable
    hidden: torch.Tensor  # [N, H] final hidden state at the position that predicts the token


Scoring = Callable[..., CompletionTokens]
"""How a model scores a batch's completion tokens: ``(model, batch, temperature) -> CompletionTokens``
(:func:`fused_completion_tokens`, or ``rl.step.token_scoring.TokenScoring``)."""


def completion_tokens(model, batch: SequenceBatch, temperature: float = 1.0,
                      scoring: Scoring | None = None) -> CompletionTokens:
    """Log-prob, entropy and predicting hidden state of every counted completion token: [N], [N], [N, H].

    By the scoring the model was prepared with (``SCORING_METHOD``: the trainer's ``TokenScoring``, a sharded
    policy's as a registered FSDP forward method), else ``scoring``, else :func:`fused_completion_tokens`."""
    prepared = getattr(scoring_model(model), SCORING_METHOD, None)
    return (prepared or scoring or fused_completion_tokens)(model, batch, temperature)


def head_logprobs(model, rows: PredictingRows, temperature: float = 1.0,
                  out_dtype: torch.dtype | None = None) -> TokenLogprobs:
    """Log-prob and entropy of each of ``rows``' targets under ``model``'s LM head, by the fused chunked path
    (``losses.fused_token_logprobs``): [N] each, in ``out_dtype`` (None: the rows' dtype). The head's
    weight computes in the rows' dtype (bfloat16 rows under autocast: a bfloat16 copy, whose gradient
    reaches the float32 weight)."""
    head = model.get_output_embeddings()
    bias = getattr(head, "bias", None)
    n = rows.targets.shape[0]
    return fused_token_logprobs(
        rows.hidden[None],  # [1, N, H]
        head.weight.to(rows.hidden.dtype),  # [V, H]
        rows.targets[None],  # [1, N]
        torch.ones((1, n), dtype=torch.bool, device=rows.targets.device),  # [1, N]
        temperature=temperature,
        lm_head_bias=None if bias is None else bias.to(rows.hidden.dtype),
        out_dtype=out_dtype,
    )


def fused_completion_tokens(model, batch: SequenceBatch, temperature: float = 1.0) -> CompletionTokens:
    """Log-prob, entropy and predicting hidden state of every counted completion token: [N], [N], [N, H], from
    the padded batch (:func:`padded_rows`) through the fused LM-head path (:func:`head_logprobs`)."""
    rows = padded_rows(model, batch)
    scored = head_logprobs(model, rows, temperature)
    return CompletionTokens(scored.logprobs, scored.entropy, rows.hidden)  # [N], [N], [N, H]


def completion_logprobs(model, batch: SequenceBatch, temperature: float = 1.0,
                        scoring: Scoring | None = None) -> TokenLogprobs:
    """Log-prob and entropy of every counted completion token, flattened row-major: [N] each
    (:func:`completion_tokens`)."""
    tokens = completion_tokens(model, batch, temperature, scoring)
    return TokenLogprobs(tokens.logprobs, tokens.entropy)
