"""An environment's rejected rows: ``rejected_rows`` rows, a one-line summary, the error when none is left.

Every stage that builds an environment from a dataset (benchmark rows, training, evaluation) keeps
the rows it rejected:

- :func:`rejections_write`: them as ``rejected_rows`` rows (``REJECTED_ROWS`` in
  ``aerorl_ops.storage.schema``, built by ``aerorl_ops.storage.duckdb_store.rejected_rows_table``)
  in a write that replaces the partition of one run id, stage and dataset (an empty list clears it);
- :func:`rejection_summary` is the line a person reads: ``"3 rows rejected: image file not found
  (2), no answers (1)"``; reasons are grouped by :func:`reason_kind`, which drops what names one
  row (a path, a line number), so ten missing images make one entry;
- :class:`NoUsableRowsError` is raised by :func:`require_items` when a dataset yields no item at
  all; it is a ``ConfigError`` (the command line prints it as one line and exits 2) naming the
  dataset, its file, its top rejection reasons and the first rejected row.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from aerorl_ops.config.fields import ConfigError
from aerorl_ops.rows.load_result import LoadResult, RejectedRow
from aerorl_ops.storage.duckdb_store import PartitionWrite, rejected_rows_table
from aerorl_ops.storage.schema import REJECTED_ROWS

SHOWN_REASONS = 3
"""How many reasons a summary names; the rest are counted together."""
_QUOTED = re.compile(r"\s*'[^']*'")


def reason_kind(reason: str) -> str:
    """A rejection reason without what names one row: the text before ``": "`` or ``" ("``, quoted
    values removed.

    >>> reason_kind("image file not found: /data/a.png"), reason_kind("duplicate item id (first seen at f#line=2)")
    ('image file not found', 'duplicate item id')
    >>> reason_kind("image path '../../etc/passwd' leaves the dataset folder: it resolves to /etc/passwd")
    'image path leaves the dataset folder'
    """
    kind = reason.split(": ", 1)[0].split(" (", 1)[0]
    return _QUOTED.sub("", kind).strip() or reason


def reason_counts(rejected: Sequence[RejectedRow]) -> list[tuple[str, int]]:
    """``(reason kind, rows)`` pairs, most rows first (ties in order of first appearance)."""
    return Counter(reason_kind(row.reason) for row in rejected).most_common()


def _rows(count: int) -> str:
    return f"{count} row{'' if count == 1 else 's'}"


def reasons_text(rejected: Sequence[RejectedRow], shown: int = SHOWN_REASONS) -> str:
    """The ``shown`` most frequent reason kinds with their counts, and how many rows the others hold.

    >>> bad = [RejectedRow("f", f"f#line={n}", None, reason) for n, reason in
    ...        enumerate(["no answers", "image file not found: a.png", "image file not found: b.png"])]
    >>> reasons_text(bad), reasons_text(bad, shown=1)
    ('image file not found (2), no answers (1)', 'image file not found (2), 1 row for 1 other reason')
    """
    counts = reason_counts(rejected)
    parts = [f"{kind} ({count})" for kind, count in counts[:shown]]
    rest = counts[shown:]
    if rest:
        others = len(rest)
        parts.append(f"{_rows(sum(count for _, count in rest))} for {others} other reason{'' if others == 1 else 's'}")
    return ", ".join(parts)


def rejection_summary(rejected: Sequence[RejectedRow], shown: int = SHOWN_REASONS) -> str:
    """One line: how many rows were rejected and why.

    >>> rejection_summary([RejectedRow("f", "f#line=1", "a", "no answers")])
    '1 row rejected: no answers (1)'
    >>> rejection_summary([])
    'no rows rejected'
    """
    if not rejected:
        return "no rows rejected"
    return f"{_rows(len(rejected))} rejected: {reasons_text(rejected, shown)}"


def rejections_write(run_id: str, stage: str, dataset: str, rejected: Sequence[RejectedRow]) -> PartitionWrite:
    """``rejected``'s ``rejected_rows`` rows as a write replacing the run's rows for ``stage`` and ``dataset``."""
    return PartitionWrite(REJECTED_ROWS, {"run_id": run_id, "stage": stage, "dataset": dataset},
                          rejected_rows_table(run_id, stage, dataset, rejected))


class NoUsableRowsError(ConfigError):
    """A dataset yielded no item: every row read was rejected, or none was read.

    ``rejected`` holds the rejections, so a caller may still record them.
    """

    def __init__(self, dataset: str, source: str, rejected: Sequence[RejectedRow]) -> None:
        self.dataset, self.source, self.rejected = dataset, source, list(rejected)
        if rejected:
            one = len(rejected) == 1
            first = rejected[0]
            problem = (f"{'the' if one else 'all'} {_rows(len(rejected))} read {'was' if one else 'were'} rejected: "
                       f"{reasons_text(rejected)}; the first, {first.locator}: {first.reason}. Fix the rows, or "
                       "point the dataset at another file")
        else:
            problem = "no row was read (the file holds no record, or the limit is 0); point it at a file with rows"
        super().__init__(f"dataset {dataset!r} ({source}) has no usable row: {problem}")


def require_items(data: LoadResult, dataset: str, source: str) -> LoadResult:
    """``data`` when it holds at least one item, else :class:`NoUsableRowsError` naming ``dataset``
    and ``source`` (its file or folder)."""
    if not data.items:
        raise NoUsableRowsError(dataset, source, data.rejected)
    return data
