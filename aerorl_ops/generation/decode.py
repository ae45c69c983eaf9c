"""Which path decodes a batch of prompts, for benchmark partitions, rollouts and evaluations alike.

A model table's ``decode`` setting (``[models.<key>] decode``, for the ``hf`` backend) picks:

- ``generate``: transformers' ``generate`` with its dynamic cache;
- ``static``: a static KV cache and this project's decode loop (``generation.static_decode``), the step eager;
- ``compiled``: the same, the step compiled once per shape bucket (CUDA graphs on a GPU);
- ``auto`` (the default): :data:`AUTO_PATHS` by the model's device, chosen by measurement
  (``benchmarks/bench_decode.py``, docs/measured.md#decoding).

The static paths decode a model as ``generate`` does only if the model's forward is all a decode step needs.
So the first batch a model decodes on a static path is checked, once: the first two decode steps' logits of its
first rows, static against ``generate``'s own (:data:`CHECK_TOLERANCE`). A model that differs, or whose forward
or cache the static decoder cannot take, keeps ``generate``, and says why once (:func:`decoder_for`). So does a
model whose generation config asks for a logits processor the static path does not apply
(``token_choice.unsupported_settings``); a sharded (FSDP) policy always does, whose ranks ``generate`` keeps in
step.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from aerorl_ops.error_line import error_line
from aerorl_ops.generation.generator_sampling import PrivateDraws, SamplingStopped, generator_decoding
from aerorl_ops.generation.static_decode import StaticDecoder
from aerorl_ops.generation.token_choice import TokenChoice, unsupported_settings
from aerorl_ops.models.entry import DECODE_AUTO, DECODE_COMPILED, DECODE_GENERATE, DECODE_STATIC
from aerorl_ops.models.loading import LoadedVLM

log = logging.getLogger(__name__)

AUTO_PATHS = {"cpu": DECODE_GENERATE, "cuda": DECODE_COMPILED}
"""``decode = "auto"`` by device type (any other device: ``generate``)."""
AUTO_COMPILE_MIN_TOKENS = 128
"""``auto`` compiles the step only for replies of at least this many new tokens; shorter ones decode on the static
path with the eager step (a compile costs tens of seconds once per shape bucket, a short reply saves less)."""
CHECK_TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-4}
"""The largest difference between static and ``generate`` logits, relative to the largest logit, that still counts
as the same decoding, by the model's dtype; any other dtype (bfloat16, float16) takes :data:`HALF_TOLERANCE`."""
HALF_TOLERANCE = 5e-2
CHECK_ROWS = 2
CHECK_STEPS = 2
DECODER_ATTRIBUTE = "aerorl_static_decoder"
"""Where a model keeps its :class:`DecoderChoice` once its first batch has been checked."""
LAST_PATH_ATTRIBUTE = "aerorl_decode_path"
"""Where a model keeps the path its last batch decoded by (``NewTokens.path``)."""


@dataclass(frozen=True)
class DecoderChoice:
    """A model's static decoder (None: ``generate`` decodes it) and the path, or why ``generate`` does."""

    decoder: StaticDecoder | None
    detail: str


@dataclass(frozen=True)
class NewTokens:
    """Each output row's new tokens (prompt removed; the EOS and the padding after it kept) and each row's seconds
    from the start of the call to its EOS (None where ``generate`` decoded without a clock)."""

    token_ids: list[list[int]]
    finished_s: list[float] | None
    path: str


def decode_path(loaded: LoadedVLM, max_new_tokens: int) -> str:
    """The path ``loaded``'s model table asks for, ``auto`` resolved by its device and the replies' length."""
    asked = loaded.source.backend.decode
    if asked != DECODE_AUTO:
        return asked
    path = AUTO_PATHS.get(loaded.device.type, DECODE_GENERATE)
    return DECODE_STATIC if path == DECODE_COMPILED and max_new_tokens < AUTO_COMPILE_MIN_TOKENS else path


def decoded_with(model: torch.nn.Module) -> str | None:
    """How ``model`` last decoded (``NewTokens.path``), or None before its first decoded batch."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return getattr(inner, LAST_PATH_ATTRIBUTE, None)


def decode_new_tokens(loaded: LoadedVLM, inputs: Mapping[str, torch.Tensor], max_new_tokens: int,
                      decoding: Mapping[str, object], eos: list[int], suppressed: list[int], copies: int = 1,
                      draws: PrivateDraws | None = None, stopping_criteria: list | None = None) -> NewTokens:
    """``copies`` replies to each prompt row of ``inputs`` (prompt-major), greedy or sampled as ``decoding``
    (``do_sample``, ``temperature``, ``top_k``, ``top_p``) says, from ``draws``' generator when given, every
    ``suppressed`` id never emitted, by the model's decode path (module docstring). ``stopping_criteria`` watch
    ``generate`` (its per-row clock); the static paths time each row themselves."""
    path = DECODE_GENERATE if sharded(loaded.model) else decode_path(loaded, max_new_tokens)
    choice = decoder_for(loaded, inputs, path, eos, suppressed) if path != DECODE_GENERATE else None
    if choice is not None and choice.decoder is not None:
        token_choice = TokenChoice.of(decoding, suppressed, None if draws is None else draws.generator)
        if draws is not None and draws.stop():
            raise SamplingStopped("sampling stopped on request")
        decoded = choice.decoder.decode(inputs, max_new_tokens, token_choice, eos, loaded.tokenizer.pad_token_id,
                                        copies, compiled=path == DECODE_COMPILED)
        new = NewTokens(decoded.tokens.tolist(), decoded.finished_s, path)
    else:
        token_ids = generated(loaded, inputs, max_new_tokens, decoding, eos, suppressed, copies, draws,
                              stopping_criteria)
        new = NewTokens(token_ids, None, DECODE_GENERATE if choice is None else choice.detail)
    inner = loaded.model.get_base_model() if hasattr(loaded.model, "get_base_model") else loaded.model
    setattr(inner, LAST_PATH_ATTRIBUTE, new.path)
    return new


def generated(loaded: LoadedVLM, inputs: Mapping[str, torch.Tensor], max_new_tokens: int,
              decoding: Mapping[str, object], eos: list[int], suppressed: list[int], copies: int,
              draws: PrivateDraws | None, stopping_criteria: list | None) -> list[list[int]]:
    """:func:`decode_new_tokens` by transformers' ``generate`` (draws through ``generator_sampling``)."""
    model = loaded.model
    kwargs = dict(decoding)
    if draws is not None and decoding.get("do_sample"):
        kwargs = generator_decoding(model, float(decoding.get("temperature") or 1.0), int(decoding.get("top_k") or 0),
                                    float(1.0 if decoding.get("top_p") is None else decoding["top_p"]), draws)
    with torch.inference_mode():
        output = model.generate(**inputs, max_new_tokens=max_new_tokens, num_return_sequences=copies,
                                pad_token_id=loaded.tokenizer.pad_token_id, eos_token_id=eos,
                                suppress_tokens=suppressed, stopping_criteria=stopping_criteria or None, **kwargs)
        if loaded.device.type == "cuda":
            torch.cuda.synchronize(loaded.device)
    return output[:, inputs["input_ids"].shape[1]:].cpu().tolist()


def decoder_for(loaded: LoadedVLM, inputs: Mapping[str, torch.Tensor], path: str, eos: list[int],
                suppressed: list[int]) -> DecoderChoice:
    """The model's static decoder, or why ``generate`` decodes it: checked on its first batch for a static
    ``path`` (``inputs``) and kept on the model (module docstring)."""
    inner = loaded.model.get_base_model() if hasattr(loaded.model, "get_base_model") else loaded.model
    known = getattr(inner, DECODER_ATTRIBUTE, None)
    if known is not None:
        return known
    reason = refusal(loaded)
    if reason is None:
        decoder = StaticDecoder(loaded.model)
        reason = check_against_generate(loaded, decoder, inputs, CHECK_STEPS + 1, eos, suppressed)
    if reason is None:
        choice = DecoderChoice(decoder, "static cache")
    else:
        choice = DecoderChoice(None, f"generate: {reason}")
        log.warning("%s decodes with generate, not the %s path: %s", loaded.source.label, path, reason)
    setattr(inner, DECODER_ATTRIBUTE, choice)
    return choice


def sharded(model: torch.nn.Module) -> bool:
    """Whether FSDP holds ``model`` (its ranks must run every forward together: ``generate``'s ``synced_gpus``).
    Asked at every call: a policy is sharded after its first (base) evaluation decoded."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return bool(getattr(inner, "_is_fsdp_managed_module", False))


def refusal(loaded: LoadedVLM) -> str | None:
    """Why ``loaded`` cannot take a static path at all (None: it may, subject to the check)."""
    unsupported = unsupported_settings(getattr(loaded.model, "generation_config", None))
    if unsupported:
        return f"its generation config sets {', '.join(unsupported)}"
    return None


def check_against_generate(loaded: LoadedVLM, decoder: StaticDecoder, inputs: Mapping[str, torch.Tensor],
                           steps: int, eos: list[int], suppressed: list[int]) -> str | None:
    """Why the static decoder does not decode ``inputs``' first rows as ``generate`` does (None: it does): the
    logits of the first ``steps`` tokens, greedy, eager (a compiled step computes what its eager step does)."""
    per_image = any(name not in ("input_ids", "attention_mask") for name in inputs)
    rows = dict(inputs) if per_image else {name: value[:CHECK_ROWS] for name, value in inputs.items()}
    model = loaded.model
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            expected = model.generate(**rows, max_new_tokens=steps, do_sample=False, temperature=None, top_k=None,
                                      top_p=None, pad_token_id=loaded.tokenizer.pad_token_id, eos_token_id=eos,
                                      suppress_tokens=suppressed, output_logits=True, return_dict_in_generate=True)
            chosen = expected.sequences[:, rows["input_ids"].shape[1]:]  # [B, S] what generate chose
            got = decoder.step_logits(rows, chosen)
    except Exception as error:  # a family whose forward or cache the static decoder cannot drive
        return f"its decode step fails ({error_line(error)})"
    finally:
        model.train(was_training)
    tolerance = CHECK_TOLERANCE.get(next(model.parameters()).dtype, HALF_TOLERANCE)
    for step, (want, have) in enumerate(zip(expected.logits, got, strict=True)):
        want = want.float().masked_fill(torch.isinf(want), 0.0)
        have = have.float().masked_fill(torch.isinf(want), 0.0)
        gap = float((want - have).abs().max() / want.abs().max().clamp(min=1e-6))
        if gap > tolerance:
            return f"its static-cache logits differ from generate's at new token {step + 1} by {gap:.1e} (relative)"
    return None
