"""Micro-batches cut by a token budget rather than a row count (verl's dynamic batch size).

A padded micro-batch costs ``rows x its longest row`` tokens of compute and memory, whatever its
rows' real lengths; rows of very different lengths in one micro-batch (a long document page beside a
short question) are mostly padding. verl's ``use_dynamic_bsz`` (``ppo_max_token_len_per_gpu``,
``verl.utils.seqlen_balancing.rearrange_micro_batches``) forms the micro-batches of the log-prob,
reference and update passes by tokens instead. It works on unpadded (packed) sequences: the budget
bounds the sum of real lengths, the number of micro-batches is ``ceil(total / budget)``, and
``get_seqlen_balanced_partitions`` (Karmarkar-Karp) spreads the rows over that many micro-batches so
their workloads are even, whatever the rows' lengths.

Our micro-batches are padded (``rl.step.sequences.SequenceBatch``), so here the budget bounds the padded
size, and the rows are packed greedily in order of length: similar lengths share a micro-batch, which
is what keeps the padding small. Greedy packing of the sorted rows gives the fewest micro-batches of
any cut of the sorted order into runs (a run of a feasible run is feasible), but unlike Karmarkar-Karp
it does not even out the micro-batches' workloads: the last micro-batch may be small.

Any split of a minibatch's rows is exact for the loss: each micro-batch weighs by its share
(``rl.step.loss.RLLoss.shares``), so the accumulated gradient does not depend on how the rows are cut.
"""

from __future__ import annotations

from collections.abc import Sequence


def token_budget_parts(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Row indices cut into micro-batches of padded size (rows x longest row) at most ``max_tokens``.

    lengths: [B] tokens per row (prompt + reply; padding excluded). Returns the parts: lists of row
    indices, each in ascending row order; every row is in exactly one part. Rows are taken shortest
    first (ties by row index, so the cut is deterministic) and each joins the current part while
    the part's padded size stays within the budget; parts come shortest rows first. A row longer
    than ``max_tokens`` on its own gets a micro-batch of its own (over the budget: it cannot be split).

    >>> token_budget_parts([5, 100, 7, 98, 6], 200)
    [[0, 2, 4], [1, 3]]
    >>> token_budget_parts([300, 4, 4], 10)
    [[1, 2], [0]]
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive token count, got {max_tokens}")
    negative = [row for row, length in enumerate(lengths) if length < 0]
    if negative:
        raise ValueError(f"row {negative[0]} has a negative length {lengths[negative[0]]}; lengths count tokens")
    parts: list[list[int]] = []
    current: list[int] = []
    for row in sorted(range(len(lengths)), key=lambda r: (lengths[r], r)):
        if current and (len(current) + 1) * lengths[row] > max_tokens:  # sorted: this row is the longest
            parts.append(sorted(current))
            current = []
        current.append(row)
    if current:
        parts.append(sorted(current))
    return parts


def padded_fraction(lengths: Sequence[int], parts: Sequence[Sequence[int]]) -> float:
    """Padding tokens / padded tokens over ``parts`` (each padded to its longest row); 0 when empty.

    lengths: [B] tokens per row; parts: lists of row indices (``token_budget_parts``, or contiguous).

    >>> padded_fraction([5, 100, 7, 98, 6], [[0, 2, 4], [1, 3]])  # 21 + 200 padded, 18 + 198 real
    0.0226...
    >>> padded_fraction([2, 4], [[0, 1]])  # 8 padded, 6 real
    0.25
    """
    padded = sum(len(part) * max((lengths[row] for row in part), default=0) for part in parts)
    real = sum(lengths[row] for part in parts for row in part)
    return (padded - real) / padded if padded else 0.0
