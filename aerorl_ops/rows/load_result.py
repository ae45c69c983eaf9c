"""What a loader hands back: the items it accepted and, for every other record, why not."""

from __future__ import annotations

from dataclasses import dataclass, field

from aerorl_ops.rows.task_item import TaskItem


@dataclass(frozen=True)
class RejectedRow:
    """A record that did not become a :class:`TaskItem`, and the reason.

    ``locator`` points a person at the record: ``"<file>#row=<index>"`` for a file
    record (index within that file), or the sample id for a generated one.
    ``sample_id`` is ``None`` when the record had no usable id.
    """

    source: str
    locator: str
    sample_id: str | None
    reason: str


@dataclass(frozen=True)
class LoadResult:
    """Every record a loader read ends up in exactly one of ``items`` or ``rejected``."""

    items: list[TaskItem] = field(default_factory=list)
    rejected: list[RejectedRow] = field(default_factory=list)

    @property
    def records_read(self) -> int:
        """Records read from the inputs: accepted plus rejected."""
        return len(self.items) + len(self.rejected)
