"""Decoding with a static KV cache and one decode step, compiled once per shape bucket.

``generate`` with its dynamic cache spends a decoding step mostly outside the GPU: a growing cache, a mask
and position ids rebuilt, a dozen logits processors and stopping criteria in Python. On the lent H200 that made
Qwen2.5-VL-3B at 40 sequences 49x slower per step than reading its weights and cache once. Here:

- **Prefill** is the model's own forward on the processor's inputs (images and all), with its own cache; its
  keys and values are then copied into a :class:`~transformers.StaticCache` of a fixed shape, and a forward
  pre-hook on the text decoder reads the position ids the model gave the prompt (1-D, or a multimodal-rope
  model's 3-D ones), from which every later token's position follows (+1 a token).
- **A decode step** is the model's forward on one token per row, with the static cache, a fixed-width
  attention mask and those positions: the same shapes every step, so ``torch.compile`` (on CUDA with CUDA
  graphs: ``mode="reduce-overhead"``) compiles it once per **shape bucket** (rows rounded up to a power of two
  up to 8 and to a multiple of 8 beyond, cache length rounded up to a multiple of 128) and replays it for
  every partition and RL step after. An optimizer step changes the weights in place, so the compiled step
  reads the new weights with no recompile; the caches of each bucket are kept and reused, so their addresses
  (which CUDA graphs capture) stay the same.
- **Finished rows leave the batch.** Every ``CHECK_EVERY`` steps the decoder looks at which rows have emitted
  an EOS; it stops when all have, and when the rows still decoding fit a bucket of half the rows or less it
  moves them (their cache rows, positions and masks) into that smaller bucket, so a batch of short and long
  replies does not pay for its short ones until the longest ends.
- ``copies`` replies per prompt (``num_return_sequences``) share one prefill: its cache rows are repeated.
- Tokens are chosen by :class:`~aerorl_ops.generation.token_choice.TokenChoice` (suppressed ids, warpers,
  greedy or a seeded draw), as ``generate`` chooses them.

A model this cannot decode as ``generate`` does (a cache with sliding-window layers, a decode step that needs
more than tokens, mask and positions) is found by ``generation.decode``'s check, which keeps ``generate``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from transformers import StaticCache
from transformers.cache_utils import StaticLayer

from aerorl_ops.generation.token_choice import TokenChoice

TARGETS = ("labels",)
"""Processor outputs that are training targets, not inputs (PaliGemma's): left out of the prefill."""
CHECK_EVERY = 8
"""Decode steps between two looks at which rows have finished (each look waits for the device)."""
LENGTH_ALIGN = 128
ROW_ALIGN = 8


def row_bucket(rows: int) -> int:
    """The decode batch for ``rows`` rows: a power of two up to 8, a multiple of 8 beyond.

    >>> [row_bucket(n) for n in (1, 3, 5, 8, 9, 40, 41)]
    [1, 4, 8, 8, 16, 40, 48]
    """
    if rows <= ROW_ALIGN:
        return 1 << (rows - 1).bit_length()
    return -(-rows // ROW_ALIGN) * ROW_ALIGN


def length_bucket(tokens: int) -> int:
    """The static cache's length for ``tokens`` tokens (prompt + new): a multiple of 128.

    >>> length_bucket(454 + 256), length_bucket(128)
    (768, 128)
    """
    return -(-tokens // LENGTH_ALIGN) * LENGTH_ALIGN


class UnsupportedCache(ValueError):
    """The model's cache has layers this decoder does not fill (sliding windows, linear attention)."""


@dataclass(frozen=True)
class Decoded:
    """What :meth:`StaticDecoder.decode` made: ``tokens`` [R, N] (pad after a row's EOS), and each row's
    seconds from the start of the call to its EOS (to the end for a row that never emitted one)."""

    tokens: torch.Tensor
    finished_s: list[float]


def output_cache(output: object):
    """The cache a forward returned (``cache`` in transformers 5.24, ``past_key_values`` before)."""
    return getattr(output, "cache", None) or getattr(output, "past_key_values", None)


def decoder_of(model: torch.nn.Module) -> torch.nn.Module:
    """The text decoder of a transformers VLM (under peft's wrapper or not), whose position ids the prefill reads."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    decoder = inner.get_decoder()
    return getattr(decoder, "model", decoder)  # a causal LM's (Llama 4's) own base model


class PrefillPositions:
    """A forward pre-hook on the text decoder that keeps the ``position_ids`` the model passes it (None when it
    passes none: the decoder then counts positions from the cache's length, as it does in every decode step)."""

    def __init__(self) -> None:
        self.positions: torch.Tensor | None = None

    def __call__(self, module, args, kwargs) -> None:
        self.positions = kwargs.get("position_ids")


@dataclass(frozen=True)
class DecodeState:
    """The rows being decoded, in their bucket's cache: slot i decodes row ``rows[i]`` of the ``total`` rows the
    decoder was given (``total`` for an empty slot)."""

    cache: StaticCache
    mask: torch.Tensor  # [b, L] 1: a key the slot attends to (its prompt's real tokens, every later position)
    positions: torch.Tensor | None  # [..., b, 1] the position of the slot's first new token (None: the cache's)
    rows: torch.Tensor  # [b]
    total: int

    @property
    def slots(self) -> int:
        return self.mask.shape[0]


class StaticDecoder:
    """One model's static-cache decoder (module docstring): its caches by shape bucket (kept, so that their
    addresses stay those a CUDA graph captured: about the KV cache of each bucket used, in device memory) and its
    decode step, eager or compiled."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.caches: dict[tuple[int, int], StaticCache] = {}
        self._compiled_step = None

    @property
    def compiled_step(self):
        """:meth:`forward_step` compiled (made on first use; on CUDA with CUDA graphs), kept for every later call."""
        if self._compiled_step is None:
            mode = "reduce-overhead" if next(self.model.parameters()).is_cuda else None
            self._compiled_step = torch.compile(self.forward_step, mode=mode, dynamic=False)
        return self._compiled_step

    def forward_step(self, tokens: torch.Tensor, positions: torch.Tensor | None, mask: torch.Tensor,
                     cache: StaticCache) -> torch.Tensor:
        """One token per row [b, 1] -> the next token's float logits [b, V]."""
        output = self.model(input_ids=tokens, attention_mask=mask, position_ids=positions, cache=cache,
                            use_cache=True, logits_to_keep=1)
        return output.logits[:, -1].float()  # [b, V]

    def decode(self, inputs: Mapping[str, torch.Tensor], max_new_tokens: int, choice: TokenChoice,
               eos: list[int], pad: int, copies: int = 1, compiled: bool = False) -> Decoded:
        """``copies`` replies to each prompt row of ``inputs`` (left-padded processor output on the model's
        device), prompt-major, each at most ``max_new_tokens`` long, the step ``compiled`` or eager (module
        docstring)."""
        started = time.perf_counter()
        with torch.inference_mode():
            logits, state = self.prefill(inputs, max_new_tokens, copies)
            if logits.is_cuda:
                torch.cuda.synchronize(logits.device)
            prefilled = (-1, time.perf_counter())
            step = self.compiled_step if compiled else self.forward_step
            tokens, marks = self.decode_steps(logits, state, max_new_tokens, choice, eos, pad, step)
            tokens = tokens[:state.total].cpu()  # [R, N]
        marks = [(step, at - started) for step, at in (prefilled, *marks)]
        ended = torch.isin(tokens, torch.tensor(eos))  # [R, N]
        width = int(torch.where(ended.any(dim=1), ended.int().argmax(dim=1) + 1, tokens.shape[1]).max())
        tokens = tokens[:, :width]  # as generate's: up to the step the last row ended
        return Decoded(tokens, [finish_time(row, eos, marks) for row in tokens.tolist()])

    def step_logits(self, inputs: Mapping[str, torch.Tensor], forced: torch.Tensor) -> list[torch.Tensor]:
        """The float logits [B, V] of each of ``forced``'s [B, S] tokens, fed one step at a time after the prompts
        (the eager step): what ``generate`` reports as its ``logits`` for the tokens it chose (``decode``'s check)."""
        with torch.inference_mode():
            logits, state = self.prefill(inputs, forced.shape[1], 1)
            found = [logits[:state.total]]
            tokens = forced.index_select(0, state.rows.clamp(max=state.total - 1))  # [b, S]
            for step in range(forced.shape[1] - 1):
                positions = None if state.positions is None else state.positions + step
                found.append(self.forward_step(tokens[:, step:step + 1], positions, state.mask,
                                               state.cache)[:state.total])
        return found

    def prefill(self, inputs: Mapping[str, torch.Tensor], max_new_tokens: int,
                copies: int) -> tuple[torch.Tensor, DecodeState]:
        """The prompts through the model's own forward; its cache copied into the bucket's static cache.
        Returns the last prompt position's logits [b, V] and the decode state."""
        hook = PrefillPositions()
        handle = decoder_of(self.model).register_forward_pre_hook(hook, with_kwargs=True)
        model_inputs = {name: value for name, value in inputs.items() if name not in TARGETS}
        try:
            output = self.model(**model_inputs, use_cache=True, logits_to_keep=1)
        finally:
            handle.remove()
        prompts, length = inputs["input_ids"].shape
        total = prompts * copies
        slots = row_bucket(total)
        device = inputs["input_ids"].device
        source = torch.arange(prompts, device=device).repeat_interleave(copies)  # [R] each row's prompt
        source = torch.cat([source, source[:1].expand(slots - total)])  # [b] empty slots copy row 0
        cache = self.cache_for(slots, length_bucket(length + max_new_tokens), output_cache(output))
        fill_cache(cache, output_cache(output), source, length)
        width = cache.layers[0].max_cache_len
        mask = inputs["attention_mask"][source]  # [b, P]
        mask = torch.cat([mask, mask.new_ones(slots, width - length)], dim=1)  # [b, L]: later tokens all count
        positions = None if hook.positions is None else hook.positions[..., -1:].index_select(-2, source) + 1
        rows = torch.cat([torch.arange(total, device=device), torch.full((slots - total,), total, device=device)])
        return output.logits[:, -1].float()[source], DecodeState(cache, mask, positions, rows, total)

    def cache_for(self, slots: int, width: int, like) -> StaticCache:
        """The static cache of bucket (``slots`` rows, ``width`` tokens), made once, shaped as cache ``like``."""
        key = (slots, width)
        if key not in self.caches:
            cache = StaticCache(config=self.model.config, max_cache_len=width)
            for layer, model_layer in zip(cache.layers, like.layers, strict=True):
                if type(layer) is not StaticLayer:
                    raise UnsupportedCache(f"its cache has {type(layer).__name__} layers")
                keys, values = model_layer.keys, model_layer.values  # [B, H, P, D]
                layer.lazy_initialization(keys.new_empty((slots, *keys.shape[1:])),
                                          values.new_empty((slots, *values.shape[1:])))
            self.caches[key] = cache
        return self.caches[key]

    def decode_steps(self, logits: torch.Tensor, state: DecodeState, max_new_tokens: int, choice: TokenChoice,
                     eos: list[int], pad: int, step_fn) -> tuple[torch.Tensor, list[tuple[int, float]]]:
        """Tokens [R + 1, N] (the last row is where empty slots write), and (step, time) at each look."""
        device = logits.device
        suppress = choice.suppression(logits.shape[-1], device)
        eos_ids = torch.tensor(eos, device=device)
        out = torch.full((state.total + 1, max_new_tokens), pad, dtype=torch.long, device=device)  # [R + 1, N]
        decoding = state.rows < state.total  # [b] rows that have not emitted an EOS
        marks = []
        for step in range(max_new_tokens):
            chosen = choice(logits, suppress, rows=state.rows.clamp(max=state.total - 1), total_rows=state.total)
            tokens = torch.where(decoding, chosen, torch.full_like(chosen, pad))  # [b]
            out[state.rows, step] = tokens
            decoding = decoding & ~torch.isin(tokens, eos_ids)
            if step == max_new_tokens - 1:
                break
            if (step + 1) % CHECK_EVERY == 0:
                left = int(decoding.sum())
                marks.append((step, time.perf_counter()))
                if left == 0:
                    break
                if row_bucket(left) <= state.slots // 2:
                    state, decoding, tokens = self.compact(state, decoding, tokens, left)
            positions = None if state.positions is None else state.positions + step
            if step_fn is not self.forward_step:
                torch.compiler.cudagraph_mark_step_begin()  # the last step's outputs are read: replay over them
            logits = step_fn(tokens[:, None], positions, state.mask, state.cache)  # [b, V]
        if state.mask.is_cuda:
            torch.cuda.synchronize(state.mask.device)
        marks.append((max_new_tokens - 1, time.perf_counter()))
        return out, marks

    def compact(self, state: DecodeState, decoding: torch.Tensor, tokens: torch.Tensor,
                left: int) -> tuple[DecodeState, torch.Tensor, torch.Tensor]:
        """The ``left`` rows still decoding, moved into the bucket of ``row_bucket(left)`` rows."""
        slots = row_bucket(left)
        keep = decoding.nonzero().flatten()  # [left]
        keep = torch.cat([keep, keep[:1].expand(slots - left)])  # [b'] empty slots copy the first
        width = state.cache.layers[0].max_cache_len
        cache = self.cache_for(slots, width, state.cache)
        for target, layer in zip(cache.layers, state.cache.layers, strict=True):
            target.keys.copy_(layer.keys.index_select(0, keep))
            target.values.copy_(layer.values.index_select(0, keep))
            target.cumulative_length.copy_(layer.cumulative_length)
        positions = None if state.positions is None else state.positions.index_select(-2, keep)
        rows = torch.where(torch.arange(slots, device=keep.device) < left, state.rows[keep], state.total)
        moved = DecodeState(cache, state.mask[keep], positions, rows, state.total)
        return moved, torch.arange(slots, device=keep.device) < left, tokens[keep]


def fill_cache(cache: StaticCache, prompt_cache, source: torch.Tensor, length: int) -> None:
    """The prompt's keys and values (``prompt_cache``, one row per prompt) into ``cache``'s first ``length``
    positions, slot i taking prompt ``source[i]``; the cache then continues at position ``length``."""
    for layer, prompt_layer in zip(cache.layers, prompt_cache.layers, strict=True):
        layer.keys[:, :, :length].copy_(prompt_layer.keys.index_select(0, source))
        layer.values[:, :, :length].copy_(prompt_layer.values.index_select(0, source))
        layer.cumulative_length.fill_(length)


def finish_time(row: list[int], eos: list[int], marks: list[tuple[int, float]]) -> float:
    """Seconds to a row's EOS (step s: between the looks around s, linearly), or to the last look.

    >>> finish_time([5, 2, 0, 0], eos=[2], marks=[(-1, 1.0), (3, 5.0)])
    3.0
    >>> finish_time([5, 6], eos=[2], marks=[(-1, 1.0), (1, 3.0)])
    3.0
    """
    step = next((i for i, token in enumerate(row) if token in eos), None)
    if step is None:
        return marks[-1][1]
    before = max((s, t) for s, t in marks if s <= step)  # marks start at step -1 (the prefill's end)
    after = min(((s, t) for s, t in marks if s >= step), default=marks[-1])
    if after[0] == before[0]:
        return after[1]
    return before[1] + (after[1] - before[1]) * (step - before[0]) / (after[0] - before[0])
