"""A replay table prepared for column-at-a-time scoring.

Strings repeat heavily in replays (the same references and entities across models and
batch sizes), so a string column is dictionary-encoded once and the scorers work on the
distinct values, mapping results back through integer codes. Encoding costs a hash
insert per value, which only pays when values repeat, so a column whose sample is
mostly distinct is kept as it is (``Encoded.distinct`` False, codes ``0..n-1``).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from aerorl_ops.rewards.context import RewardContext
from aerorl_ops.rewards.replay_lines import REPLAY_SCHEMA


class Encoded(NamedTuple):
    """A string column as values and one code per row (``values[codes]`` = the column).

    When ``distinct`` the values are all different, so equal codes mean equal strings;
    otherwise the values are the column itself and the codes ``0..n-1``.
    """

    values: pa.Array
    codes: np.ndarray
    distinct: bool = True


class EncodedLists(NamedTuple):
    """A list-of-strings column flattened: each item's row, and the items encoded."""

    rows: np.ndarray
    items: Encoded


class Occurrences(NamedTuple):
    """Items of a list column: the row of each item and its code into shared values."""

    rows: np.ndarray
    codes: np.ndarray


SAMPLE_SIZE = 20_000
MOSTLY_DISTINCT = 0.5


def encode(column: pa.Array) -> Encoded:
    """Dictionary-encode ``column``: its distinct values and each row's code."""
    encoded = pc.dictionary_encode(column)
    return Encoded(encoded.dictionary, encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64))


def encode_if_repeating(column: pa.Array) -> Encoded:
    """``encode(column)``, unless an evenly spread sample is mostly distinct values."""
    stride = max(len(column) // SAMPLE_SIZE, 1)
    sample = column[::stride].to_pylist() if len(column) > SAMPLE_SIZE else []
    if sample and len(set(sample)) > MOSTLY_DISTINCT * len(sample):
        return Encoded(column, np.arange(len(column), dtype=np.int64), distinct=False)
    return encode(column)


def encode_lists(column: pa.Array) -> EncodedLists:
    rows = pc.list_parent_indices(column).to_numpy(zero_copy_only=False).astype(np.int64)
    return EncodedLists(rows, encode_if_repeating(pc.list_flatten(column)))


class ReplayColumns:
    """Lazily derived, shared views of a replay table (see ``REPLAY_SCHEMA``)."""

    def __init__(self, table: pa.Table) -> None:
        missing = [name for name in REPLAY_SCHEMA.names if name not in table.column_names]
        if missing:
            raise ValueError(f"replay table lacks columns {missing}; read it with read_replay()")
        self.table = table
        self.num_rows = table.num_rows

    def column(self, name: str) -> pa.Array:
        return self.table.column(name).combine_chunks()

    @cached_property
    def response(self) -> Encoded:
        return encode_if_repeating(self.column("response"))

    @cached_property
    def reference(self) -> EncodedLists:
        return encode_lists(self.column("reference"))

    @cached_property
    def entities(self) -> Encoded:
        """Distinct entity strings over evidence and claims together (codes: evidence
        items first, then claimed items); see ``entity_occurrences``."""
        evidence, claimed = self.column("evidence_entities"), self.column("claimed_entities")
        return encode_if_repeating(pa.concat_arrays([pc.list_flatten(evidence), pc.list_flatten(claimed)]))

    @cached_property
    def entity_occurrences(self) -> tuple[Occurrences, Occurrences]:
        """(evidence, claimed): each item's row and its code into ``entities.values``."""
        evidence, claimed = self.column("evidence_entities"), self.column("claimed_entities")
        evidence_rows = pc.list_parent_indices(evidence).to_numpy(zero_copy_only=False).astype(np.int64)
        claimed_rows = pc.list_parent_indices(claimed).to_numpy(zero_copy_only=False).astype(np.int64)
        codes = self.entities.codes
        return (
            Occurrences(evidence_rows, codes[: len(evidence_rows)]),
            Occurrences(claimed_rows, codes[len(evidence_rows) :]),
        )

    @cached_property
    def latency_ms(self) -> np.ndarray:
        return self.column("latency_ms").to_numpy(zero_copy_only=False)

    def contexts(self) -> Any:
        """One ``RewardContext`` per row, for components scored record by record.

        The metadata holds the replay columns (entities, ``latency_ms``, and ``dataset``
        / ``raw_response`` when present); other metadata keys of the file are not kept.
        """
        names = ("prompt", "response", "reference", "reference_is_list", "evidence_entities",
                 "claimed_entities", "latency_ms", "dataset", "raw_response")
        columns = [self.column(name).to_pylist() for name in names]
        rows = zip(*columns, strict=True)
        for prompt, response, reference, is_list, evidence, claimed, latency, dataset, raw in rows:
            metadata: dict[str, Any] = {
                "evidence_entities": evidence,
                "claimed_entities": claimed,
                "latency_ms": latency,
            }
            if dataset is not None:
                metadata["dataset"] = dataset
            if raw is not None:
                metadata["raw_response"] = raw
            if reference is not None and not is_list:
                reference = reference[0]
            yield RewardContext(prompt=prompt, response=response, reference=reference, metadata=metadata)
