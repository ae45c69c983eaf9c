"""Response length and the length-clip ratio, as in MAYE's response metrics.

With ``N`` responses of ``L_i`` generated tokens each and a generation cap of ``max_length``
new tokens::

    mean_length       = sum_i L_i / N
    length_clip_ratio = #{i : L_i >= max_length} / N

A response that reaches the cap was cut off. (MAYE logs ``seq_lens >= max_tokens - 1`` with
``seq_lens`` the index of the last token, which is the same test.) With no responses, both
values are ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class LengthMetrics:
    """Length statistics of ``n_responses`` responses generated with at most ``max_length`` tokens."""

    n_responses: int
    max_length: int
    mean_length: float | None
    length_clip_ratio: float | None


def length_metrics(token_lengths: Any, max_length: int) -> LengthMetrics:
    """Mean length in tokens and the share of responses cut at ``max_length``.

    ``token_lengths`` holds each response's generated-token count (a sequence, numpy array
    or CPU tensor).

    >>> length_metrics([10, 32, 20, 32], max_length=32)
    LengthMetrics(n_responses=4, max_length=32, mean_length=23.5, length_clip_ratio=0.5)
    >>> length_metrics([], max_length=32).mean_length is None
    True
    """
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise ValueError(f"max_length must be a positive integer (the generation cap), got {max_length!r}")
    lengths = np.asarray(token_lengths)
    if lengths.ndim != 1:
        raise ValueError(f"token_lengths must be one count per response (1-D), got shape {lengths.shape}")
    if lengths.size and not np.issubdtype(lengths.dtype, np.integer):
        raise TypeError(f"token_lengths must hold integer token counts, got dtype {lengths.dtype}")
    bad = np.flatnonzero((lengths < 0) | (lengths > max_length))
    if bad.size:
        index = int(bad[0])
        raise ValueError(
            f"token_lengths[{index}] = {int(lengths[index])} lies outside [0, max_length={max_length}]; "
            "pass the cap the responses were generated with"
        )
    if lengths.size == 0:
        return LengthMetrics(n_responses=0, max_length=max_length, mean_length=None, length_clip_ratio=None)
    return LengthMetrics(
        n_responses=int(lengths.size),
        max_length=max_length,
        mean_length=float(lengths.mean()),
        length_clip_ratio=float((lengths == max_length).mean()),
    )
