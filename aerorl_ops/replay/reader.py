"""Reading replay files: record by record (the reference) or as columns (fast).

Both readers apply the same line validation (``parse_replay_line``): by default the
first bad line raises ``ReplayFormatError`` naming the file, the 1-based line and the
reason; with ``skip_invalid=True`` bad lines are handed to ``on_reject`` and skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from aerorl_ops.replay.fast_reader import ReplayRead, read_fast
from aerorl_ops.rewards.replay_lines import (
    InvalidRecord,
    RejectedLine,
    ReplayFormatError,
    canonical_record,
    canonical_table,
    is_blank,
    parse_replay_line,
)

RejectHandler = Callable[[RejectedLine], None]


def _rejected(path: Path, line_number: int, raw: bytes, error: InvalidRecord) -> RejectedLine:
    return RejectedLine(str(path), line_number, str(error), raw.decode("utf-8", "replace"))


def iter_replay_records(
    path: str | Path,
    *,
    skip_invalid: bool = False,
    on_reject: RejectHandler | None = None,
    progress: Callable[[int], object] | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield each valid record of a JSONL replay file as a dict (AeroRL's replay reader).

    ``progress`` is called with the byte length of every line read.
    """
    path = Path(path)
    with path.open("rb") as handle:
        for line_number, line in enumerate(handle, start=1):
            if progress is not None:
                progress(len(line))
            raw = line.rstrip(b"\n")
            if is_blank(raw):
                continue
            try:
                record = parse_replay_line(raw)
            except InvalidRecord as error:
                if not skip_invalid:
                    raise ReplayFormatError(path, line_number, str(error)) from None
                if on_reject is not None:
                    on_reject(_rejected(path, line_number, raw, error))
                continue
            yield record


def read_replay_reference(path: str | Path) -> ReplayRead:
    """Columns of a replay file built record by record (the reference for ``load_replay``)."""
    path = Path(path)
    rows, rejected, lines_read = [], [], 0
    for line_number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        if is_blank(raw):
            continue
        lines_read += 1
        try:
            rows.append(canonical_record(parse_replay_line(raw)))
        except InvalidRecord as error:
            rejected.append(_rejected(path, line_number, raw, error))
    return ReplayRead(canonical_table(rows), rejected, lines_read)


def load_replay(path: str | Path) -> ReplayRead:
    """Columns of every valid record, every rejected line, and the non-blank line count."""
    path = Path(path)
    return read_fast(path) or read_replay_reference(path)


def read_replay(
    path: str | Path, *, skip_invalid: bool = False, on_reject: RejectHandler | None = None
) -> pa.Table:
    """A replay file as a table with ``REPLAY_SCHEMA`` columns, for ``evaluate_table``.

    Raises ``ReplayFormatError`` for the first bad line unless ``skip_invalid``.
    """
    result = load_replay(path)
    if result.rejected and not skip_invalid:
        first = result.rejected[0]
        raise ReplayFormatError(first.path, first.line_number, first.reason)
    if on_reject is not None:
        for rejected in result.rejected:
            on_reject(rejected)
    return result.table
