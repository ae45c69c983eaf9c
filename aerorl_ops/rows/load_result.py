"""What a loader hands back: the items it accepted and, for every other record, why not."""

from __future__ import annotations

from dataclasses import dataclass, field

from aerorl_ops.error_line import printable_line, shortened
from aerorl_ops.rows.task_item import TaskItem


def unicode_problem(text: str) -> str | None:
    r"""Why ``text`` cannot be stored as UTF-8 (a lone surrogate, which JSON's ``\ud800`` escape makes), or None.

    >>> unicode_problem("caf\u00e9"), unicode_problem("a\ud800")
    (None, 'a lone surrogate at char 1')
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return f"a lone surrogate at char {error.start}"
    return None


@dataclass(frozen=True)
class RejectedRow:
    """A record that did not become a :class:`TaskItem`, and the reason.

    ``locator`` points a person at the record: ``"<file>#row=<index>"`` for a file
    record (index within that file), or the sample id for a generated one.
    ``sample_id`` is ``None`` when the record had no usable id (none, or one that is not text UTF-8 can
    store). ``reason`` is one printable line (``printable_line``) of at most a few thousand characters
    (``shortened``), whatever a record's values held.
    """

    source: str
    locator: str
    sample_id: str | None
    reason: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", shortened(printable_line(self.reason)))
        if self.sample_id is not None and unicode_problem(self.sample_id):
            object.__setattr__(self, "sample_id", None)


@dataclass(frozen=True)
class LoadResult:
    """Every record a loader read ends up in exactly one of ``items`` or ``rejected``."""

    items: list[TaskItem] = field(default_factory=list)
    rejected: list[RejectedRow] = field(default_factory=list)

    @property
    def records_read(self) -> int:
        """Records read from the inputs: accepted plus rejected."""
        return len(self.items) + len(self.rejected)
