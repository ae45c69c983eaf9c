"""Column-at-a-time versions of the built-in components, and ``COLUMN_KERNELS``, the table
from each component type to its kernel.

Each kernel returns one float64 score per row, equal to the per-record component's score.
Arithmetic follows the per-record code operation by operation (same IEEE results);
string rules go through ``text_columns`` (vectorised on ASCII, Python otherwise).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from aerorl_ops.rewards.columnar.alias_columns import AliasPairs, entity_alias_pairs
from aerorl_ops.rewards.columnar.columns import Encoded, Occurrences, ReplayColumns, encode
from aerorl_ops.rewards.columnar.keys import (
    any_equal_in_row,
    any_per_row,
    first_rows,
    row_signatures,
    same_row_pairs,
    unique_inverse,
    unique_sorted,
)
from aerorl_ops.rewards.columnar.text_columns import contains_pairs, py_lower, py_strip, word_counts
from aerorl_ops.rewards.components import CostReward, FormatReward, GroundingReward, VerifierReward
from aerorl_ops.rewards.context import RewardContext


def clip_scores(values: np.ndarray, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    """``clip_score`` element-wise, NaN handling included (``max(lo, min(hi, v))``)."""
    capped = np.where(values < hi, values, hi)
    return np.where(capped > lo, capped, lo)


def _positive_part(values: np.ndarray) -> np.ndarray:
    """``max(0.0, v)`` element-wise."""
    return np.where(values > 0.0, values, 0.0)


def cost_scores(columns: ReplayColumns, target_tokens: int, latency_budget_ms: float) -> np.ndarray:
    response = columns.response
    tokens = word_counts(response.values)[response.codes]
    token_ratio = tokens / max(target_tokens, 1)
    latency_ratio = columns.latency_ms / max(latency_budget_ms, 1.0)
    penalty = _positive_part(token_ratio - 1.0) + _positive_part(latency_ratio - 1.0)
    return clip_scores(1.0 - penalty)


def format_scores(columns: ReplayColumns, require_json: bool, regex_pattern: str | None) -> np.ndarray:
    if not require_json and not regex_pattern:
        return np.ones(columns.num_rows)
    reward = FormatReward(require_json=require_json, regex_pattern=regex_pattern)
    response = columns.response
    distinct = np.array([reward(RewardContext("", text)).score for text in response.values.to_pylist()])
    return distinct[response.codes]


def verifier_scores(columns: ReplayColumns, case_sensitive: bool) -> np.ndarray:
    num_rows = columns.num_rows
    response, reference = columns.response, columns.reference
    items = reference.items
    candidates = py_strip(items.values)
    is_candidate = pc.not_equal(pc.binary_length(candidates), 0).to_numpy(zero_copy_only=False)
    responses = py_strip(response.values)
    if not case_sensitive:
        candidates, responses = py_lower(candidates), py_lower(responses)

    kept = is_candidate[items.codes]
    rows = reference.rows[kept]
    # Each distinct (response, candidate) pair of strings is compared once.
    width = len(items.values)
    pair_keys = response.codes[rows] * width + items.codes[kept]
    distinct_keys, pair_index = unique_inverse(pair_keys)
    haystacks = responses.take(pa.array(distinct_keys // width))
    needles = candidates.take(pa.array(distinct_keys % width))
    distinct_exact = pc.equal(haystacks, needles).to_numpy(zero_copy_only=False)
    # Only pairs that are not equal, with a needle no longer than its haystack, need a search.
    fits = pc.less_equal(pc.binary_length(needles), pc.binary_length(haystacks)).to_numpy(zero_copy_only=False)
    search = np.flatnonzero(fits & ~distinct_exact)
    distinct_contains = distinct_exact.copy()
    distinct_contains[search] = contains_pairs(haystacks.take(pa.array(search)), needles.take(pa.array(search)))
    exact, contains = distinct_exact[pair_index], distinct_contains[pair_index]

    has_reference = np.bincount(rows, minlength=num_rows) > 0
    any_exact = any_per_row(rows, exact, num_rows)
    any_contains = any_per_row(rows, contains, num_rows)
    scores = np.where(any_exact, 1.0, np.where(any_contains, 0.5, -0.5))
    return np.where(has_reference, scores, 0.0)


def _alias_entries(
    occurrence_rows: np.ndarray, occurrence_entity: np.ndarray, pairs: AliasPairs, alias_ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every alias of every entity occurrence: (occurrence index, row, alias id), in
    occurrence order."""
    order = np.argsort(pairs.entity, kind="stable")
    entity_sorted, ids_sorted = pairs.entity[order], alias_ids[order]
    first = np.searchsorted(entity_sorted, occurrence_entity, side="left")
    counts = np.searchsorted(entity_sorted, occurrence_entity, side="right") - first
    occurrence = np.repeat(np.arange(len(occurrence_entity)), counts)
    positions = np.repeat(first - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) + np.arange(len(occurrence))
    return occurrence, occurrence_rows[occurrence], ids_sorted[positions]


def _spelled_like_evidence(
    evidence: Occurrences, claimed: Occurrences, entities: Encoded, num_rows: int
) -> np.ndarray:
    """For each claim: is some evidence entity of its row the very same string?"""
    if not entities.distinct:
        pair_count = int(np.bincount(evidence.rows, minlength=num_rows)[claimed.rows].sum())
        if pair_count <= 8 * (len(evidence.rows) + len(claimed.rows)):
            claim, item = same_row_pairs(claimed.rows, evidence.rows, num_rows)
            same = pc.equal(entities.values.take(pa.array(claimed.codes[claim])),
                            entities.values.take(pa.array(evidence.codes[item])))
            return np.bincount(claim, weights=same.to_numpy(zero_copy_only=False), minlength=len(claimed.rows)) > 0
        distinct = encode(entities.values)
        evidence = Occurrences(evidence.rows, distinct.codes[evidence.codes])
        claimed = Occurrences(claimed.rows, distinct.codes[claimed.codes])
    return any_equal_in_row(claimed.rows, claimed.codes, evidence.rows, evidence.codes)


def grounding_scores(columns: ReplayColumns) -> np.ndarray:
    """Precision of claims against evidence, as ``GroundingReward``.

    Rows listing the same evidence and claims (a replay that repeats its questions) are
    scored once. A claim spelled exactly like an evidence entity of its row is supported
    without computing aliases; aliases are computed only for the other claims' rows.
    """
    num_rows = columns.num_rows
    evidence, claimed = columns.entity_occurrences
    if columns.entities.distinct:
        signatures = row_signatures([(evidence.rows, evidence.codes), (claimed.rows, claimed.codes)], num_rows)
        first = first_rows(signatures)
        if len(first) <= num_rows // 2:
            is_first = np.zeros(num_rows, dtype=bool)
            is_first[first] = True
            rank = np.cumsum(is_first) - 1

            def first_only(items: Occurrences) -> Occurrences:
                kept = is_first[items.rows]
                return Occurrences(rank[items.rows[kept]], items.codes[kept])

            scores = _grounding(first_only(evidence), first_only(claimed), columns.entities, len(first))
            return scores[rank[first]][signatures]
    return _grounding(evidence, claimed, columns.entities, num_rows)


def _grounding(evidence: Occurrences, claimed: Occurrences, encoded: Encoded, num_rows: int) -> np.ndarray:
    entities = encoded.values
    is_blank = pc.equal(py_strip(entities), "").to_numpy(zero_copy_only=False)
    counted = ~is_blank[claimed.codes]
    supported = counted & _spelled_like_evidence(evidence, claimed, encoded, num_rows)

    open_claims = np.flatnonzero(counted & ~supported)
    if len(open_claims):
        open_rows = np.zeros(num_rows, dtype=bool)
        open_rows[claimed.rows[open_claims]] = True
        open_evidence = np.flatnonzero(open_rows[evidence.rows])
        needed = unique_sorted(np.concatenate([claimed.codes[open_claims], evidence.codes[open_evidence]]))
        pairs = entity_alias_pairs(entities.take(pa.array(needed)))
        alias_ids = encode(pairs.aliases).codes
        _, evidence_rows, evidence_aliases = _alias_entries(
            evidence.rows[open_evidence], np.searchsorted(needed, evidence.codes[open_evidence]), pairs, alias_ids
        )
        claim, claim_rows, claim_aliases = _alias_entries(
            claimed.rows[open_claims], np.searchsorted(needed, claimed.codes[open_claims]), pairs, alias_ids
        )
        hit = any_equal_in_row(claim_rows, claim_aliases, evidence_rows, evidence_aliases)
        supported[open_claims] = np.bincount(claim, weights=hit, minlength=len(open_claims)) > 0

    claims = np.bincount(claimed.rows, weights=counted, minlength=num_rows)
    overlap = np.bincount(claimed.rows, weights=supported, minlength=num_rows)
    precision = overlap / np.maximum(claims, 1)
    return np.where(claims > 0, clip_scores(2.0 * precision - 1.0), 0.0)


ColumnKernel = Callable[[Any, ReplayColumns], np.ndarray]
"""Scores every row of a replay table for one configured component: ``kernel(component, columns)``."""

COLUMN_KERNELS: Mapping[type, ColumnKernel] = {
    VerifierReward: lambda reward, columns: verifier_scores(columns, reward.case_sensitive),
    GroundingReward: lambda reward, columns: grounding_scores(columns),
    FormatReward: lambda reward, columns: format_scores(columns, reward.require_json, reward.regex_pattern),
    CostReward: lambda reward, columns: cost_scores(columns, reward.target_tokens, reward.latency_budget_ms),
}
"""The column kernel of each built-in component type. Looked up by exact type: a subclass may
score differently, so it is scored record by record."""
