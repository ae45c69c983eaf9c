"""Set operations on integer keys (``row * width + code``), the columnar scorer's joins."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def unique_sorted(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` by sorting (NumPy 2.4's default ``unique`` is many times slower).

    >>> unique_sorted(np.array([5, 1, 5, 3])).tolist()
    [1, 3, 5]
    """
    ordered = np.sort(values)
    return ordered[np.concatenate([[True], ordered[1:] != ordered[:-1]])] if len(ordered) else ordered


def unique_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` for non-negative integers: by marking a
    dense table when the values are small, else by sorting.

    >>> [a.tolist() for a in unique_inverse(np.array([7, 2, 7, 9]))]
    [[2, 7, 9], [1, 0, 1, 2]]
    >>> [a.tolist() for a in unique_inverse(np.array([10**12, 3, 10**12]))]
    [[3, 1000000000000], [1, 0, 1]]
    """
    if len(values) and values.max() < 4 * len(values) + 1024:
        present = np.zeros(int(values.max()) + 1, dtype=bool)
        present[values] = True
        rank = np.cumsum(present) - 1
        return np.flatnonzero(present), rank[values]
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.concatenate([[True], ordered[1:] != ordered[:-1]]) if len(ordered) else np.zeros(0, dtype=bool)
    inverse = np.empty(len(values), dtype=np.int64)
    inverse[order] = np.cumsum(starts) - 1
    return ordered[starts], inverse


def any_per_row(rows: np.ndarray, flags: np.ndarray, num_rows: int) -> np.ndarray:
    """Whether any item of each row is flagged (items given by their row).

    >>> any_per_row(np.array([0, 0, 2]), np.array([False, True, False]), 4).tolist()
    [True, False, False, False]
    """
    return np.bincount(rows, weights=flags.astype(np.float64), minlength=num_rows) > 0


def contains_keys(haystack: np.ndarray, needles: np.ndarray) -> np.ndarray:
    """``[needle in set(haystack) for needle in needles]`` for int64 keys (haystack sorted, unique).

    >>> contains_keys(np.array([2, 4, 8]), np.array([4, 5, 9, 2])).tolist()
    [True, False, False, True]
    """
    if len(haystack) == 0:
        return np.zeros(len(needles), dtype=bool)
    found = np.minimum(np.searchsorted(haystack, needles), len(haystack) - 1)
    return haystack[found] == needles


def same_row_pairs(left_rows: np.ndarray, right_rows: np.ndarray, num_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (left item, right item) pair of the same row; ``right_rows`` must be sorted.

    >>> [a.tolist() for a in same_row_pairs(np.array([1, 0]), np.array([0, 1, 1]), 2)]
    [[0, 0, 1], [1, 2, 0]]
    """
    right_count = np.bincount(right_rows, minlength=num_rows)
    right_start = np.concatenate([[0], np.cumsum(right_count)[:-1]])
    per_left = right_count[left_rows]
    left = np.repeat(np.arange(len(left_rows)), per_left)
    offsets = np.repeat(right_start[left_rows] - np.concatenate([[0], np.cumsum(per_left)[:-1]]), per_left)
    return left, offsets + np.arange(len(left))


def any_equal_in_row(
    left_rows: np.ndarray, left_keys: np.ndarray, right_rows: np.ndarray, right_keys: np.ndarray
) -> np.ndarray:
    """For each left item: does some right item of the same row have the same key?

    >>> any_equal_in_row(np.array([0, 0, 1]), np.array([5, 6, 5]), np.array([0, 1]), np.array([6, 7])).tolist()
    [False, True, False]
    """
    width = int(max(left_keys.max(initial=0), right_keys.max(initial=0))) + 1
    return contains_keys(unique_sorted(right_rows * width + right_keys), left_rows * width + left_keys)


def row_signatures(parts: list[tuple[np.ndarray, np.ndarray]], num_rows: int) -> np.ndarray:
    """One integer per row, equal for two rows exactly when each part lists the same codes
    in the same order. ``parts`` are (rows, codes) of list items, rows sorted.

    >>> row_signatures([(np.array([0, 1, 2]), np.array([4, 4, 5])), (np.array([0, 1]), np.array([7, 7]))], 3).tolist()
    [0, 0, 1]
    """
    counts = [np.bincount(rows, minlength=num_rows) for rows, _ in parts]
    sizes = sum(counts) + len(parts)  # every part ends with a -1 separator
    row_start = np.concatenate([[0], np.cumsum(sizes)])
    combined = np.full(int(row_start[-1]), -1, dtype=np.int32)
    offset = row_start[:-1].copy()
    for (rows, codes), count in zip(parts, counts, strict=True):
        item_start = np.concatenate([[0], np.cumsum(count)[:-1]])
        combined[offset[rows] + np.arange(len(rows)) - item_start[rows]] = codes
        offset += count + 1
    keys = pa.Array.from_buffers(
        pa.large_binary(), num_rows, [None, pa.py_buffer(row_start * 4), pa.py_buffer(combined)]
    )
    return pc.dictionary_encode(keys).indices.to_numpy(zero_copy_only=False).astype(np.int64)


def first_rows(signatures: np.ndarray) -> np.ndarray:
    """For each signature ``0..k-1``, the first row that has it.

    >>> first_rows(np.array([1, 0, 1, 2])).tolist()
    [1, 0, 3]
    """
    first = np.full(int(signatures.max(initial=-1)) + 1, len(signatures), dtype=np.int64)
    np.minimum.at(first, signatures, np.arange(len(signatures)))
    return first
