"""Python's string rules applied to whole Arrow arrays, with the same results.

Arrow and DuckDB lower-case, trim and split like Python only on ASCII text (their
Unicode tables and whitespace sets differ from Python's). So each helper runs the
vectorised form on ASCII values and Python's own code on the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from aerorl_ops.rewards.normalize import word_count

PYTHON_ASCII_WHITESPACE = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"
"""The ASCII characters ``str.isspace()`` (and so ``strip``/``split``/``re``'s ``\\s``) accepts."""
_WHITESPACE_CLASS = r"[\t\n\x0b\x0c\r\x1c-\x1f ]"


def ascii_mask(values: pa.Array) -> np.ndarray:
    """True where a string is pure ASCII."""
    return pc.string_is_ascii(values).to_numpy(zero_copy_only=False)


def _patch_non_ascii(
    result: pa.Array, values: pa.Array, is_ascii: np.ndarray, python_rule: Callable[[str], Any]
) -> pa.Array:
    """``result`` with its non-ASCII positions recomputed by ``python_rule``."""
    if is_ascii.all():
        return result
    others = np.flatnonzero(~is_ascii)
    patched = pa.array([python_rule(text) for text in values.take(pa.array(others)).to_pylist()], type=result.type)
    order = np.arange(len(result))
    order[others] = len(result) + np.arange(len(others))
    return pa.concat_arrays([result, patched]).take(pa.array(order))


def py_strip(values: pa.Array) -> pa.Array:
    """``[s.strip() for s in values]``."""
    stripped = pc.utf8_trim(values, characters=PYTHON_ASCII_WHITESPACE)
    return _patch_non_ascii(stripped, values, ascii_mask(values), str.strip)


def py_lower(values: pa.Array) -> pa.Array:
    """``[s.lower() for s in values]``."""
    return _patch_non_ascii(pc.ascii_lower(values), values, ascii_mask(values), str.lower)


def word_counts(values: pa.Array) -> np.ndarray:
    """``[len(s.split()) for s in values]`` (the cost reward's ``word_count``)."""
    counts = pc.count_substring_regex(values, f"[^{_WHITESPACE_CLASS[1:-1]}]+")
    counts = _patch_non_ascii(counts, values, ascii_mask(values), word_count)
    return counts.to_numpy(zero_copy_only=False).astype(np.int64)


def contains_pairs(haystacks: pa.Array, needles: pa.Array) -> np.ndarray:
    """``[n in h for h, n in zip(haystacks, needles)]`` (byte substring = code point
    substring for valid UTF-8)."""
    if len(haystacks) == 0:
        return np.zeros(0, dtype=bool)
    pairs = pa.table({"haystack": haystacks, "needle": needles})
    connection = duckdb.connect()
    try:
        connection.register("pairs", pairs)
        found = connection.sql("SELECT contains(haystack, needle) AS found FROM pairs").to_arrow_table()
    finally:
        connection.close()
    return found.column("found").to_numpy().astype(bool)
