"""Replay lines: the one validation rule both readers apply, and the canonical columns.

A replay file is JSONL, one record per line::

    {"id": str, "prompt": str, "response": str, "reference": str | list[str] | null,
     "metadata": {"evidence_entities": [str], "claimed_entities": [str], "latency_ms": float,
                  "generated_tokens": int, "dataset": str, "raw_response": str, ...}}

A non-blank line is rejected when it is not valid UTF-8, not valid JSON, not a JSON
object, has no ``response``, or has a ``metadata`` that is not an object. A string
holding an unpaired surrogate escape (``"\\ud800"``) is rejected too: it is not
Unicode text, so no UTF-8 column can hold it. It is also
rejected where AeroRL's scorer would crash on it: ``metadata.evidence_entities`` or
``claimed_entities`` that cannot be iterated, or a ``metadata.latency_ms`` that
``float()`` refuses. Blank lines are skipped. Everything else is scored with AeroRL's
conversions (``str()`` of a non-string response, and so on).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa

ENTITY_FIELDS = ("evidence_entities", "claimed_entities")

REPLAY_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string()),
        pa.field("prompt", pa.string(), nullable=False),
        pa.field("response", pa.string(), nullable=False),
        pa.field("reference", pa.list_(pa.string())),
        pa.field("reference_is_list", pa.bool_(), nullable=False),
        pa.field("evidence_entities", pa.list_(pa.string()), nullable=False),
        pa.field("claimed_entities", pa.list_(pa.string()), nullable=False),
        pa.field("latency_ms", pa.float64(), nullable=False),
        pa.field("dataset", pa.string()),
        pa.field("raw_response", pa.string()),
    ]
)
"""Columns of a replay table (``read_replay``): what the reward components read.

``reference`` is null when the record has none; a single-string reference is a
one-element list with ``reference_is_list`` False. Entities and references are the
``str()`` of each JSON item, as AeroRL sees them; a missing ``latency_ms`` is 0.0;
``dataset`` and ``raw_response`` are null unless they are strings.
"""


class ReplayFormatError(ValueError):
    """A replay line that cannot be scored; names the file, the 1-based line and why."""

    def __init__(self, path: str | Path, line_number: int, reason: str) -> None:
        self.path = str(path)
        self.line_number = line_number
        self.reason = reason
        super().__init__(f"{self.path}:{line_number}: {reason}")


class RejectedLine(NamedTuple):
    """A skipped line of a replay file, kept for the rejected-lines side file."""

    path: str
    line_number: int
    reason: str
    text: str


class InvalidRecord(ValueError):
    """Raised by ``parse_replay_line``; the message is the reason."""


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _has_lone_surrogate(record: dict[str, Any]) -> bool:
    try:
        json.dumps(record, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse_replay_line(raw: bytes) -> dict[str, Any]:
    """Decode and validate one non-blank replay line, or raise ``InvalidRecord``.

    >>> parse_replay_line(b'{"response": "stop"}')
    {'response': 'stop'}
    >>> try:
    ...     parse_replay_line(b'{"response": "a", "metadata": []}')
    ... except InvalidRecord as error:
    ...     print(error)
    'metadata' is not a JSON object (found array)
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidRecord(f"not valid UTF-8 (byte {error.start + 1}: {error.reason})") from None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidRecord(f"not valid JSON: {error.msg} (column {error.colno})") from None
    except RecursionError:
        raise InvalidRecord("not valid JSON: nested too deeply") from None
    if not isinstance(record, dict):
        raise InvalidRecord(f"not a JSON object (found {_json_kind(record)})")
    if (b"\\ud" in raw or b"\\uD" in raw) and _has_lone_surrogate(record):
        raise InvalidRecord("a string holds an unpaired UTF-16 surrogate escape (not Unicode text)")
    if "response" not in record:
        raise InvalidRecord("missing required field 'response'")
    metadata = record.get("metadata", {})
    if not isinstance(metadata, dict):
        raise InvalidRecord(f"'metadata' is not a JSON object (found {_json_kind(metadata)})")
    for name in ENTITY_FIELDS:
        entities = metadata.get(name, [])
        if not isinstance(entities, (list, str, dict)):
            raise InvalidRecord(f"'metadata.{name}' is not a list (found {_json_kind(entities)})")
    try:
        float(metadata.get("latency_ms", 0.0))
    except (TypeError, ValueError, OverflowError):
        found = _json_kind(metadata.get("latency_ms"))
        raise InvalidRecord(f"'metadata.latency_ms' is not a number (found {found})") from None
    return record


def is_blank(raw: bytes) -> bool:
    """Whether a line holds only whitespace (skipped, not counted, never rejected)."""
    return not raw.strip()


class CanonicalRecord(NamedTuple):
    """One record as the replay table's columns hold it (see ``REPLAY_SCHEMA``)."""

    id: str | None
    prompt: str
    response: str
    reference: list[str] | None
    reference_is_list: bool
    evidence_entities: list[str]
    claimed_entities: list[str]
    latency_ms: float
    dataset: str | None
    raw_response: str | None


def canonical_record(record: dict[str, Any]) -> CanonicalRecord:
    """The columns of one validated record, with AeroRL's conversions applied.

    >>> canonical_record({"id": 7, "response": 5, "reference": "x", "metadata": {"latency_ms": "2"}})
    CanonicalRecord(id='7', prompt='', response='5', reference=['x'], reference_is_list=False, \
evidence_entities=[], claimed_entities=[], latency_ms=2.0, dataset=None, raw_response=None)
    """
    metadata = record.get("metadata", {})
    record_id = record.get("id")
    reference = record.get("reference")
    is_list = isinstance(reference, list)
    if reference is not None:
        reference = [str(item) for item in reference] if is_list else [str(reference)]
    dataset = metadata.get("dataset")
    raw_response = metadata.get("raw_response")
    return CanonicalRecord(
        id=record_id if record_id is None or isinstance(record_id, str) else str(record_id),
        prompt=str(record.get("prompt", "")),
        response=str(record["response"]),
        reference=reference,
        reference_is_list=is_list,
        evidence_entities=[str(item) for item in metadata.get("evidence_entities", [])],
        claimed_entities=[str(item) for item in metadata.get("claimed_entities", [])],
        latency_ms=float(metadata.get("latency_ms", 0.0)),
        dataset=dataset if isinstance(dataset, str) else None,
        raw_response=raw_response if isinstance(raw_response, str) else None,
    )


def canonical_table(rows: list[CanonicalRecord]) -> pa.Table:
    """A replay table from canonical records (the reference reader's way to build one)."""
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in REPLAY_SCHEMA.names]
    return pa.Table.from_arrays(
        [pa.array(list(column), type=field.type) for column, field in zip(columns, REPLAY_SCHEMA, strict=True)],
        schema=REPLAY_SCHEMA,
    )
