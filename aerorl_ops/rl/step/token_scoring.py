"""How the step scores completion tokens: the machinery of the log-prob passes (the rollout's scoring, the
reference's, every update's) chosen once per run, and per model once, by a check.

A :class:`TokenScoring` is what ``rl.step.sequences.completion_tokens`` calls for a prepared policy (the trainer
prepares it with the run's, ``rl.runtime.sharding``) and for the reference. It chooses:

- **Packed or padded** (``packed_sequences``): packed, a micro-batch's rows are one row of real tokens
  (``rl.step.packing``), so no layer computes padding. ``auto`` packs where the model gives what the padded
  batch gives, found out once per model by a check on its first scored micro-batch of two rows or more (both
  paths on that batch, under ``torch.no_grad`` in eval mode: a family whose code cannot take packed inputs fails
  or differs there, and keeps the padded path; no list of family names); ``on`` packs and fails where the check
  does; ``off`` never packs. The decision is logged, and each step's ``training_steps.scoring_path`` says it.
- **The attention of packed rows**: the text model switches to ``rl.step.varlen_attention``'s before the check,
  and back if packing does not hold: each sequence's own attention (on CUDA FlashAttention's variable-length
  kernel, on CPU sdpa sequence by sequence), where sdpa would compute a block-diagonal mask over the whole row;
  padded batches and generation keep sdpa's.
- **Precision** (``mixed_precision``): ``bf16`` runs the model's forward under ``torch.autocast`` to bfloat16,
  its parameters (the master weights, fp32 when the model loads in fp32) and their gradients unchanged; the
  log-probs and entropies come out in float32. ``auto``: bf16 on CUDA, off elsewhere.
- **The LM-head kernel** (``logprob_kernel``): ``aerorl`` (``losses.fused_token_logprobs``, chunked, [N, V]
  logits never whole) or ``liger`` (Liger Kernel's fused linear cross-entropy with entropy:
  ``losses.liger_logprobs``; needs liger-kernel, Triton and CUDA).
"""

from __future__ import annotations

import logging
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import NamedTuple

import torch

from aerorl_ops.config.fields import ConfigError
from aerorl_ops.config.training import Recipe
from aerorl_ops.error_line import error_line
from aerorl_ops.losses import TokenLogprobs
from aerorl_ops.losses.liger_logprobs import liger_head_logprobs
from aerorl_ops.rl.step.packing import contiguous_rows, packed_rows
from aerorl_ops.rl.step.sequences import (
    CompletionTokens,
    PredictingRows,
    SequenceBatch,
    head_logprobs,
    padded_rows,
    scoring_model,
)
from aerorl_ops.rl.step.varlen_attention import VARLEN_ATTENTION, set_text_attention, text_attention

log = logging.getLogger(__name__)

PACKING_CHECK = "aerorl_packing_check"
"""Where a model keeps its :class:`PackingCheck` once its first batch has been checked."""
CHECK_TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-4}
"""The largest mean absolute log-prob difference between packed and padded scoring that still counts as equal, by
the dtype the model computes in; any other (bfloat16, float16) takes :data:`LOW_PRECISION_TOLERANCE`."""
LOW_PRECISION_TOLERANCE = 2e-2


class PackingCheck(NamedTuple):
    """A model's answer to whether it scores packed sequences as it scores padded ones."""

    packs: bool
    detail: str  # the path, for logs and ``scoring_path``: "packed (sdpa attention)", "padded: ..."


@dataclass(frozen=True)
class TokenScoring:
    """The log-prob passes' machinery (module docstring): ``packing`` auto | on | off; ``autocast`` the dtype the
    forward computes in under ``torch.autocast`` (None: the parameters'); ``kernel`` aerorl | liger;
    ``attention`` the text attention packed rows run with (None: the model's own)."""

    packing: str = "off"
    autocast: torch.dtype | None = None
    kernel: str = "aerorl"
    attention: str | None = None

    @classmethod
    def of(cls, recipe: Recipe, device: torch.device) -> TokenScoring:
        """The scoring ``recipe`` asks for, on ``device`` (``auto`` resolved for it)."""
        bf16 = recipe.mixed_precision == "bf16" or (recipe.mixed_precision == "auto" and device.type == "cuda")
        return cls(recipe.packed_sequences, torch.bfloat16 if bf16 else None, recipe.logprob_kernel, VARLEN_ATTENTION)

    def __call__(self, model, batch: SequenceBatch, temperature: float = 1.0) -> CompletionTokens:
        """Log-prob, entropy and predicting hidden state of every counted completion token of ``batch``:
        [N], [N], [N, H] (as ``sequences.fused_completion_tokens``)."""
        rows_of = packed_rows if self.packs(model, batch) else padded_rows
        with self.precision(batch.input_ids.device):
            rows = rows_of(model, batch)  # [N, H], [N]
        scored = self.head(model, rows, temperature)
        return CompletionTokens(scored.logprobs, scored.entropy, rows.hidden)  # [N], [N], [N, H]

    def precision(self, device: torch.device):
        """The forward's autocast context (a no-op without one)."""
        return nullcontext() if self.autocast is None else torch.autocast(device.type, dtype=self.autocast)

    def head(self, model, rows: PredictingRows, temperature: float) -> TokenLogprobs:
        """The LM head's log-probs and entropies of ``rows``' targets by this scoring's kernel: [N] each."""
        out_dtype = torch.float32 if self.autocast is not None else None
        if self.kernel == "liger":
            return liger_head_logprobs(model.get_output_embeddings(), rows.hidden, rows.targets, temperature)
        return head_logprobs(model, rows, temperature, out_dtype)

    def packs(self, model, batch: SequenceBatch) -> bool:
        """Whether ``batch`` is scored packed: ``packing`` allows it, the model's check (made now, on its first
        batch of two rows or more) holds, and the batch's rows are each one run of tokens."""
        if self.packing == "off" or batch.input_ids.shape[0] < 2:
            return False
        check = getattr(scoring_model(model), PACKING_CHECK, None) or self.check(model, batch)
        if not check.packs and self.packing == "on":
            raise ConfigError(f"packed_sequences = \"on\", but {type(scoring_model(model)).__name__} cannot score "
                              f"packed sequences as padded ones ({check.detail}); set packed_sequences to \"auto\" "
                              "or \"off\"")
        return check.packs and contiguous_rows(batch.inputs["attention_mask"].bool())

    def check(self, model, batch: SequenceBatch) -> PackingCheck:
        """Score ``batch`` padded and packed and keep the answer on the model (module docstring), logged."""
        inner = scoring_model(model)
        own = text_attention(inner)
        switched = self.attention is not None and own != self.attention and set_text_attention(inner, self.attention)
        check = self.compare(model, batch, text_attention(inner) or "its own")
        if switched and not check.packs:
            set_text_attention(inner, own)
        setattr(inner, PACKING_CHECK, check)
        log.info("%s scores %s", type(inner).__name__, check.detail)
        return check

    def compare(self, model, batch: SequenceBatch, attention: str) -> PackingCheck:
        """Whether ``batch``'s completion log-probs packed equal its padded ones (``CHECK_TOLERANCE``)."""
        with evaluating(model), torch.no_grad():
            with self.precision(batch.input_ids.device):
                try:
                    packed = packed_rows(model, batch)
                except (RuntimeError, ValueError, TypeError, IndexError) as error:
                    return PackingCheck(False, f"padded: packed inputs fail ({error_line(error)})")
                padded = padded_rows(model, batch)
            difference = self.head(model, packed, 1.0).logprobs.float() - self.head(model, padded, 1.0).logprobs.float()
        gap = float(difference.abs().mean()) if difference.numel() else 0.0
        tolerance = CHECK_TOLERANCE.get(self.autocast or padded.hidden.dtype, LOW_PRECISION_TOLERANCE)
        if gap > tolerance:
            return PackingCheck(False, f"padded: packed log-probs differ from padded ones by {gap:.2e} on average "
                                       f"(tolerance {tolerance:.0e})")
        return PackingCheck(True, f"packed ({attention} attention)")


@contextmanager
def evaluating(model: torch.nn.Module):
    """``model`` in eval mode (no dropout) for the duration, then back in its mode."""
    training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(training)


def scoring_path(model, scoring) -> str:
    """How ``model`` scores with ``scoring`` (a :class:`TokenScoring`, or any other scoring: padded), for the
    step's record: ``packed (<attention> attention)``, ``padded: <why>``, or ``padded`` when not checked yet or
    not asked for."""
    check = getattr(scoring_model(model), PACKING_CHECK, None)
    if not isinstance(scoring, TokenScoring) or scoring.packing == "off" or check is None:
        return "padded"
    return check.detail
