"""How a decoding step turns the model's next-token logits into tokens, as ``generate`` does for this project's
keyword arguments: suppressed ids at -inf, the warpers ``do_sample`` adds (temperature, top-k, top-p), then the
argmax (greedy) or a draw.

A draw is the Gumbel-max trick: ``argmax(scores + g)`` with ``g = -log(-log(u))``, ``u`` uniform, is a sample of
``softmax(scores)``, the distribution ``generate``'s ``torch.multinomial`` samples. The noise is drawn for every
row of the batch the decoder was given, from the caller's ``torch.Generator`` when it has one (a training run's
private draws) or torch's global RNG, so a row's tokens depend on the seed and its place in the batch, never on
which other rows have already finished (``static_decode`` drops those rows from its batch).

A model whose generation config asks ``generate`` for another logits processor (a repetition penalty, n-gram
blocking, a minimum length, ...) is not decoded here: :func:`unsupported_settings` names what it sets, and the
caller keeps ``generate``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

NEUTRAL_SETTINGS = {"repetition_penalty": 1.0, "no_repeat_ngram_size": 0, "encoder_no_repeat_ngram_size": 0,
                    "min_length": 0, "min_new_tokens": None, "bad_words_ids": None, "force_words_ids": None,
                    "sequence_bias": None, "forced_bos_token_id": None, "forced_eos_token_id": None,
                    "begin_suppress_tokens": None, "exponential_decay_length_penalty": None,
                    "guidance_scale": None, "min_p": None, "typical_p": 1.0, "epsilon_cutoff": 0.0,
                    "eta_cutoff": 0.0, "renormalize_logits": False, "watermarking_config": None,
                    "diversity_penalty": 0.0, "num_beams": 1}
"""Generation-config settings whose value here makes ``generate`` add no logits processor (or search)."""


def unsupported_settings(generation_config: object) -> list[str]:
    """The settings of a model's generation config that this module does not apply: ``name=value`` each.

    >>> from transformers import GenerationConfig
    >>> unsupported_settings(GenerationConfig(repetition_penalty=1.05, top_k=1)), unsupported_settings(None)
    (['repetition_penalty=1.05'], [])
    """
    found = []
    for name, neutral in NEUTRAL_SETTINGS.items():
        value = getattr(generation_config, name, neutral)
        if value is not None and value != neutral and not (neutral is None and value in (0, [], {})):
            found.append(f"{name}={value}")
    return found


@dataclass(frozen=True)
class TokenChoice:
    """Greedy (``sample`` False) or sampled at ``temperature`` / ``top_k`` (0: off) / ``top_p`` (1: off); the
    ``suppressed`` ids never chosen; ``generator``: where draws come from (None: torch's global RNG)."""

    sample: bool
    suppressed: tuple[int, ...] = ()
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    generator: torch.Generator | None = None

    @classmethod
    def of(cls, decoding: Mapping[str, object], suppressed: Sequence[int] = (),
           generator: torch.Generator | None = None) -> TokenChoice:
        """From ``generate`` keyword arguments (``do_sample``, ``temperature``, ``top_k``, ``top_p``; None: off)."""
        if not decoding.get("do_sample"):
            return cls(False, tuple(suppressed))
        return cls(True, tuple(suppressed), float(decoding.get("temperature") or 1.0), int(decoding.get("top_k") or 0),
                   float(1.0 if decoding.get("top_p") is None else decoding["top_p"]), generator)

    def warpers(self) -> LogitsProcessorList:
        """``generate``'s sampling warpers for these settings, in its order (none when greedy)."""
        warpers = LogitsProcessorList()
        if self.sample and self.temperature != 1.0:
            warpers.append(TemperatureLogitsWarper(self.temperature))
        if self.sample and self.top_k:
            warpers.append(TopKLogitsWarper(top_k=self.top_k, min_tokens_to_keep=1))
        if self.sample and self.top_p < 1.0:
            warpers.append(TopPLogitsWarper(top_p=self.top_p, min_tokens_to_keep=1))
        return warpers

    def __call__(self, logits: torch.Tensor, suppress_mask: torch.Tensor | None = None,
                 rows: torch.Tensor | None = None, total_rows: int | None = None) -> torch.Tensor:
        """[b, V] float logits -> [b] chosen ids; ``suppress_mask`` [V] bool (True: never chosen), made once by
        :meth:`suppression` for the logits' vocabulary and device. A draw takes noise for ``total_rows`` rows
        (default b) and gives logits row i the noise of row ``rows[i]`` (default i): the row of the batch the
        decoder was given, however many have left it."""
        scores = logits if suppress_mask is None else logits.masked_fill(suppress_mask, -torch.inf)  # [b, V]
        if not self.sample:
            return scores.argmax(dim=-1)  # [b]
        scores = self.warpers()(None, scores)  # [b, V]
        shape = (total_rows or scores.shape[0], scores.shape[1])
        uniform = torch.rand(shape, generator=self.generator, device=scores.device, dtype=torch.float32)  # [R, V]
        uniform = (uniform if rows is None else uniform[rows]).clamp_(min=torch.finfo(torch.float32).tiny)  # [b, V]
        return (scores - torch.log(-torch.log(uniform))).argmax(dim=-1)  # [b] a draw of softmax(scores)

    def suppression(self, vocabulary: int, device: torch.device) -> torch.Tensor | None:
        """[V] bool: the suppressed ids (None when there are none)."""
        if not self.suppressed:
            return None
        mask = torch.zeros(vocabulary, dtype=torch.bool, device=device)
        mask[[i for i in self.suppressed if i < vocabulary]] = True
        return mask
