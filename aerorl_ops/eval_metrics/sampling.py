"""Sampling settings of an accuracy evaluation, with MAYE's three as the defaults.

MAYE (Ma et al., 2025, "Rethinking RL Scaling for Vision Language Models", GAIR-NLP/MAYE,
``recipes/full_ppo_vllm_distributed.py``, ``eval`` and its three calls per split) scores every
validation and test question at:

- ``high_temp_pass8``: pass@8 at temperature 1.0, top-p 1.0 (8 samples, right if any is);
- ``medium_temp_pass1``: pass@1 at temperature 0.6, top-p 1.0 (one sample);
- ``low_temp_pass1``: pass@1 at temperature 0.01, top-p 0.001 (one near-greedy sample).

MAYE caps each response at 2048 new tokens; the cap is the generation step's setting, not a
field here. Its pass@8 ("any of 8 samples is right") equals the unbiased estimator at
``n = k = 8``; drawing ``n > k`` samples gives a lower-variance estimate of the same pass@k.
Plain greedy decoding stands in for the near-greedy setting with ``greedy=True``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_SLUG = re.compile(r"[a-z0-9][a-z0-9_]*")


@dataclass(frozen=True)
class SamplingSetting:
    """How one accuracy is measured: decode ``n`` responses per question, report pass@``k``.

    ``name`` is a slug (lower-case letters, digits, ``_``) that keys the setting's rows.
    ``greedy=True`` decodes deterministically (``temperature``/``top_p`` unused), so ``n``
    and ``k`` must be 1. Change ``n`` or ``k`` with ``dataclasses.replace``.

    >>> from dataclasses import replace
    >>> replace(MAYE_SAMPLING_SETTINGS[0], n=16).label
    'pass@8 (n=16, temperature=1.0, top_p=1.0)'
    >>> SamplingSetting("greedy_pass1", greedy=True).label
    'pass@1 (greedy)'
    """

    name: str
    temperature: float = 1.0
    top_p: float = 1.0
    n: int = 1
    k: int = 1
    greedy: bool = False

    def __post_init__(self) -> None:
        where = f"sampling setting {self.name!r}"
        if not _SLUG.fullmatch(self.name):
            raise ValueError(f"{where}: the name must be a slug of lower-case letters, digits and '_'")
        for field in ("n", "k"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{where}: {field} must be an integer, got {value!r}")
        if not 1 <= self.k <= self.n:
            raise ValueError(f"{where}: needs 1 <= k <= n, got k={self.k}, n={self.n}")
        if self.greedy:
            if self.n != 1:
                raise ValueError(f"{where}: greedy decoding repeats one response, so n must be 1, got n={self.n}")
            return
        if not (math.isfinite(self.temperature) and self.temperature > 0):
            raise ValueError(f"{where}: temperature must be > 0 when sampling, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"{where}: top_p must lie in (0, 1], got {self.top_p}")

    @property
    def label(self) -> str:
        """A human-readable description for tables and plot legends."""
        if self.greedy:
            return f"pass@{self.k} (greedy)"
        samples = f"n={self.n}, " if self.n != self.k else ""
        return f"pass@{self.k} ({samples}temperature={self.temperature}, top_p={self.top_p})"


MAYE_SAMPLING_SETTINGS: tuple[SamplingSetting, ...] = (
    SamplingSetting("high_temp_pass8", temperature=1.0, top_p=1.0, n=8, k=8),
    SamplingSetting("medium_temp_pass1", temperature=0.6, top_p=1.0, n=1, k=1),
    SamplingSetting("low_temp_pass1", temperature=0.01, top_p=0.001, n=1, k=1),
)
"""MAYE's three evaluation settings, in the order of its ``eval`` strategies high/medium/low."""
