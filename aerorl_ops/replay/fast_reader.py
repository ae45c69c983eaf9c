"""Read a replay file into its columns with DuckDB's JSON reader, agreeing line for line
with the reference reader (``parse_replay_line`` + ``canonical_record``).

DuckDB parses in parallel, but it is more lenient than Python's ``json`` and converts
types silently, so the fast path only trusts a line that is provably ordinary:

1. One regular-expression scan of the whole file (run while DuckDB reads) looks for
   anything where the two could differ: a trailing comma, an ``inf``/``nan`` literal, a
   non-string value where a string column is read, a non-object ``metadata``, a
   ``latency_ms`` that is not a plain number, a reference or entity list with a
   non-string item, a reference that is neither a string, a list nor null, an escaped
   printable ASCII character (which could spell a key). Matches inside strings are
   false alarms, which only cost time.
2. DuckDB reads the file strictly; any error (invalid JSON, non-object line, duplicate
   key, bad UTF-8, a lone surrogate, a line over DuckDB's 16 MB object limit), or a
   UTF-8 byte-order mark, hands the whole file to the reference reader.
3. Lines flagged by the scan, and rows the SQL cannot convert exactly (a missing
   ``response``, a non-finite latency), are re-read by ``parse_replay_line`` and
   replaced or rejected.

Known difference: JSON nested deeper than Python's recursion limit is rejected by the
reference reader and accepted here.
"""

from __future__ import annotations

import mmap
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from aerorl_ops.rewards.replay_lines import (
    REPLAY_SCHEMA,
    CanonicalRecord,
    InvalidRecord,
    RejectedLine,
    canonical_record,
    canonical_table,
    is_blank,
    parse_replay_line,
)

_WS = r"[ \t\r\n]*"
_JSON_STRING = r'"(?:[^"\\]|\\.)*"'
SUSPECT_PATTERN = "|".join(
    [
        rf",{_WS}[}}\]]",
        rf"[:,\[]{_WS}[-+]?[iInN][nNaA][fFnN]",
        rf'"(?:id|prompt|response|dataset|raw_response)"{_WS}:{_WS}[^" \t\r\n]',
        rf'"metadata"{_WS}:{_WS}[^{{ \t\r\n]',
        rf'"latency_ms"{_WS}:{_WS}[^-0-9 \t\r\n]',
        rf'"(?:evidence_entities|claimed_entities)"{_WS}:{_WS}'
        rf'(?:[^\[ \t\r\n]|\[(?:{_WS}{_JSON_STRING}{_WS},)*{_WS}[^"\] \t\r\n])',
        rf'"reference"{_WS}:{_WS}(?:[^"\[n \t\r\n]|\[(?:{_WS}{_JSON_STRING}{_WS},)*{_WS}[^"\] \t\r\n])',
        r"\\u00[2-7][0-9a-fA-F]",
    ]
)
"""Lines where DuckDB and Python's ``json`` might read different values (see module doc)."""

_UTF8_BOM = b"\xef\xbb\xbf"

_READ_SQL = """
SELECT
    id,
    coalesce(prompt, '') AS prompt,
    coalesce(response, '') AS response,
    CASE
        WHEN reference IS NULL THEN NULL
        WHEN starts_with(reference, '[') THEN CAST(reference AS VARCHAR[])
        ELSE [reference ->> '$']
    END AS reference,
    coalesce(starts_with(reference, '['), false) AS reference_is_list,
    coalesce(metadata.evidence_entities, []) AS evidence_entities,
    coalesce(metadata.claimed_entities, []) AS claimed_entities,
    coalesce(metadata.latency_ms, 0.0) AS latency_ms,
    metadata.dataset AS dataset,
    metadata.raw_response AS raw_response,
    response IS NULL OR NOT isfinite(coalesce(metadata.latency_ms, 0.0)) AS recheck
FROM read_json(
    $path,
    format = 'newline_delimited',
    columns = {
        id: 'VARCHAR', prompt: 'VARCHAR', response: 'VARCHAR', reference: 'JSON',
        metadata: 'STRUCT(evidence_entities VARCHAR[], claimed_entities VARCHAR[], latency_ms DOUBLE,
                          dataset VARCHAR, raw_response VARCHAR)'
    }
)
"""


class ReplayRead(NamedTuple):
    """What reading a replay file gives: the scored columns and the rejected lines."""

    table: pa.Table
    rejected: list[RejectedLine]
    lines_read: int


def _binary_array(data: bytes | mmap.mmap, offsets: np.ndarray) -> pa.Array:
    """``data`` cut at ``offsets`` into a binary array, without copying the bytes."""
    return pa.Array.from_buffers(
        pa.large_binary(), len(offsets) - 1, [None, pa.py_buffer(offsets.astype(np.int64)), pa.py_buffer(data)]
    )


def _line_offsets(data: bytes | mmap.mmap) -> np.ndarray:
    """Start of every physical line of ``data``, then its end (newlines stay in the lines)."""
    newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    ends = [len(data)] if len(data) and data[-1:] != b"\n" else []
    return np.concatenate([[0], newlines + 1, ends]).astype(np.int64)


def _non_blank_line_numbers(data: bytes | mmap.mmap, offsets: np.ndarray) -> np.ndarray:
    """1-based numbers of the lines that hold something besides whitespace."""
    starts, ends = offsets[:-1], offsets[1:]
    first = np.full(len(starts), 10, dtype=np.uint8)
    has_bytes = ends > starts
    first[has_bytes] = np.frombuffer(data, dtype=np.uint8)[starts[has_bytes]]
    maybe_blank = np.flatnonzero(np.isin(first, np.frombuffer(b" \t\r\n\x0b\x0c", dtype=np.uint8)))
    keep = np.ones(len(starts), dtype=bool)
    for index in maybe_blank.tolist():
        keep[index] = not is_blank(data[starts[index] : ends[index]])
    return np.flatnonzero(keep) + 1


def _duckdb_rows(path: Path) -> pa.Table | None:
    connection = duckdb.connect()
    try:
        return connection.sql(_READ_SQL, params={"path": str(path)}).to_arrow_table()
    except (duckdb.InvalidInputException, duckdb.ConversionException, UnicodeDecodeError):
        # DuckDB's message quotes the bad line cut at a byte offset, which can split a
        # character: the binding then fails to decode the message itself.
        return None
    finally:
        connection.close()


class _Scan(NamedTuple):
    data: bytes | mmap.mmap
    suspicious: bool


def _map(path: Path) -> bytes | mmap.mmap:
    """The file's bytes, mapped rather than copied (a mapping supports the same reads)."""
    with path.open("rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return b""
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)


def _scan(path: Path) -> _Scan:
    """The file's bytes, and whether any line may read differently in DuckDB (step 1)."""
    data = _map(path)
    whole = _binary_array(data, np.array([0, len(data)]))
    return _Scan(data, bool(pc.any(pc.match_substring_regex(whole, SUSPECT_PATTERN)).as_py()))


def read_fast(path: Path) -> ReplayRead | None:
    """Read ``path`` with DuckDB; None when only the reference reader can say what the
    file holds (the caller then uses it). The scan runs while DuckDB reads."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        scanning = pool.submit(_scan, path)
        rows = _duckdb_rows(path)
        data, suspicious = scanning.result()
    if rows is None or data[: len(_UTF8_BOM)] == _UTF8_BOM:
        return None
    recheck = rows.column("recheck").to_numpy(zero_copy_only=False)
    rows = rows.drop_columns(["recheck"]).cast(REPLAY_SCHEMA)
    if not suspicious and not recheck.any():
        return ReplayRead(rows, [], rows.num_rows)
    offsets = _line_offsets(data)
    line_numbers = _non_blank_line_numbers(data, offsets)
    if len(line_numbers) != rows.num_rows:
        return None
    flagged = recheck.copy()
    if suspicious:
        lines = _binary_array(data, offsets)
        suspect_lines = pc.match_substring_regex(lines, SUSPECT_PATTERN).to_numpy(zero_copy_only=False)
        flagged |= suspect_lines[line_numbers - 1]
    return _reread_flagged(path, data, offsets, rows, line_numbers, np.flatnonzero(flagged))


def _reread_flagged(
    path: Path,
    data: bytes | mmap.mmap,
    offsets: np.ndarray,
    rows: pa.Table,
    line_numbers: np.ndarray,
    flagged: np.ndarray,
) -> ReplayRead:
    rejected: list[RejectedLine] = []
    replacements: dict[int, CanonicalRecord] = {}
    for row in flagged.tolist():
        line_number = int(line_numbers[row])
        raw = data[offsets[line_number - 1] : offsets[line_number]].rstrip(b"\n")
        try:
            replacements[row] = canonical_record(parse_replay_line(raw))
        except InvalidRecord as error:
            rejected.append(RejectedLine(str(path), line_number, str(error), raw.decode("utf-8", "replace")))
    keep = np.ones(rows.num_rows, dtype=bool)
    keep[flagged] = False
    pieces = [rows.filter(pa.array(keep))]
    positions = [np.flatnonzero(keep)]
    if replacements:
        pieces.append(canonical_table(list(replacements.values())))
        positions.append(np.fromiter(replacements, dtype=np.int64))
    table = pa.concat_tables(pieces)
    order = np.argsort(np.concatenate(positions), kind="stable")
    return ReplayRead(table.take(pa.array(order)), rejected, len(line_numbers))
