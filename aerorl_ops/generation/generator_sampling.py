"""Sampling with ``generate`` from a caller's own ``torch.Generator`` instead of torch's global RNG.

``generate(do_sample=True)`` draws every token with ``torch.multinomial`` from the global RNG, and takes no
generator. A thread cannot own that RNG: two threads drawing from it interleave their draws in whatever
order the scheduler runs them, and reseeding it in one thread moves the other's. So
:class:`GeneratorSampling` takes the sampling step into a logits processor: the warpers ``generate`` adds
for ``do_sample`` (temperature, top-k, top-p, on generate's own conditions), the softmax, and
``torch.multinomial(..., generator=...)``; it returns scores that are ``-inf`` but at the drawn token, and
``generate`` runs greedy (``do_sample=False``), so its argmax is the draw. The processors ``generate`` runs
in either mode (the suppressed tokens, a repetition penalty) come before it, as they come before the
warpers. A generator seeded with ``s`` therefore draws, bit for bit, the tokens ``torch.manual_seed(s)``
and ``do_sample=True`` draw: the same probabilities, the same stream (tested).

:class:`PrivateRng` is what a sampling thread holds: per micro-batch, a fresh generator seeded as
``torch.manual_seed(seed)`` seeds the global RNG (:class:`PrivateDraws`), and a ``stop`` callable asked before
every token (when it answers True the processor raises :class:`SamplingStopped`: a generation in a worker
thread ends within a token of being cancelled). Its :meth:`PrivateRng.leave_global_rng` puts the global RNG
where sampling through it would have left it, so what runs after (dropout) draws as it would have.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from transformers import (
    LogitsProcessor,
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

UNSUPPORTED_WARPERS = ("min_p", "typical_p", "epsilon_cutoff", "eta_cutoff", "top_h")
"""``generate``'s other sampling warpers: a model whose generation config sets one is refused (by name)."""


class SamplingStopped(RuntimeError):
    """A generation was stopped by its ``stop`` callable before it finished."""


def _never() -> bool:
    return False


@dataclass(frozen=True)
class PrivateDraws:
    """Where a sampled generation draws its tokens: ``generator``; ``stop`` is asked before each token."""

    generator: torch.Generator
    stop: Callable[[], bool] = _never


class PrivateRng:
    """The generators of a thread that samples micro-batch after micro-batch on ``device`` (module docstring)."""

    def __init__(self, device: torch.device | str, stop: Callable[[], bool] = _never) -> None:
        self.device, self.stop = torch.device(device), stop
        self.last: tuple[int, torch.Generator] | None = None  # the last part's seed and generator

    def part(self, seed: int) -> PrivateDraws:
        """A fresh generator seeded with ``seed``, as ``torch.manual_seed(seed)`` seeds the global RNG."""
        generator = torch.Generator(device=self.device)
        generator.manual_seed(seed)
        self.last = (seed, generator)
        return PrivateDraws(generator, self.stop)

    def leave_global_rng(self) -> None:
        """Torch's global RNG as ``torch.manual_seed(s)`` (s: the last part's seed) and that part's draws through
        it would have left it. Call it from the thread that owns the global RNG."""
        if self.last is None:
            return
        seed, generator = self.last
        torch.manual_seed(seed)  # every device's generator, as the global sampling seeded them
        if self.device.type == "cpu":
            torch.set_rng_state(generator.get_state())
        elif self.device.type == "cuda":
            torch.cuda.set_rng_state(generator.get_state(), self.device)
        else:
            raise ValueError(f"sampling from a private generator on {self.device} is not supported: use cpu or cuda")


class GeneratorSampling(LogitsProcessor):
    """One token per row drawn from ``generator`` at ``temperature`` / ``top_k`` (0: off) / ``top_p`` (1: off)
    (module docstring)."""

    def __init__(self, temperature: float, top_k: int, top_p: float, draws: PrivateDraws) -> None:
        warpers = []  # the conditions of generate's ``_get_logits_processor`` for one beam
        if temperature is not None and temperature != 1.0:
            warpers.append(TemperatureLogitsWarper(temperature))
        if top_k:
            warpers.append(TopKLogitsWarper(top_k=top_k, min_tokens_to_keep=1))
        if top_p is not None and top_p < 1.0:
            warpers.append(TopPLogitsWarper(top_p=top_p, min_tokens_to_keep=1))
        self.warpers, self.draws = LogitsProcessorList(warpers), draws

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.draws.stop():
            raise SamplingStopped("sampling stopped on request")
        probs = torch.nn.functional.softmax(self.warpers(input_ids, scores), dim=-1)  # [B, V] as do_sample's
        drawn = torch.multinomial(probs, num_samples=1, generator=self.draws.generator)  # [B, 1]
        return torch.full_like(scores, -torch.inf).scatter_(1, drawn, 0.0)  # [B, V] finite at the draw only


def generator_decoding(model: torch.nn.Module, temperature: float, top_k: int, top_p: float,
                       draws: PrivateDraws) -> dict[str, object]:
    """``generate`` keyword arguments that sample from ``draws`` (module docstring); a ``model`` whose
    generation config sets a warper this does not apply (``UNSUPPORTED_WARPERS``) is refused, naming it."""
    config = getattr(model, "generation_config", None)
    unsupported = [name for name in UNSUPPORTED_WARPERS
                   if getattr(config, name, None) is not None and not _neutral(name, getattr(config, name))]
    if unsupported:
        raise ValueError(f"the model's generation config sets {', '.join(unsupported)}, which sampling from a "
                         f"generator does not apply; remove it from generation_config.json or sample with "
                         f'rollout_mode = "sync"')
    return {"do_sample": False, "temperature": None, "top_k": None, "top_p": None,
            "logits_processor": LogitsProcessorList([GeneratorSampling(temperature, top_k, top_p, draws)])}


def _neutral(name: str, value: float) -> bool:
    """Whether a warper setting is one ``generate`` ignores (typical_p 1, a cutoff of 0)."""
    return (name == "typical_p" and value >= 1.0) or (name in ("epsilon_cutoff", "eta_cutoff") and value <= 0.0)
