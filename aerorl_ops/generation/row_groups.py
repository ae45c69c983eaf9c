"""A partition's rows cut into runs that share their generation settings: a dataset may set its own
``max_new_tokens`` (``[datasets.<name>] max_new_tokens``; an ARC grid needs more than a word).

Consecutive rows whose datasets ask for the same number of new tokens stay one group, so a partition whose
datasets set none is one group at ``[generation]``'s settings, batched exactly as before. A run of video rows
is a group of its own too: some families cannot take a video and images in one batch
(``models.video_input.check_batch_mix``), so no batch mixes them.

>>> from aerorl_ops.rows.task_item import TaskItem
>>> rows = [TaskItem(f"{name}-{n}", name, "test", "f", "Q?", ("a",), ()) for name in ("docvqa", "arc") for n in (0, 1)]
>>> [(len(g.rows), g.settings.max_new_tokens) for g in row_groups(rows, GenerationSettings(), {"arc": 96})]
[(2, 24), (2, 96)]
>>> [(len(g.rows), g.settings.max_new_tokens) for g in row_groups(rows, GenerationSettings(), {})]
[(4, 24)]
>>> clip = TaskItem("clip", "docvqa", "test", "f", "Q?", ("a",), (), video=(b"f0",))
>>> [len(g.rows) for g in row_groups([rows[0], clip, rows[1]], GenerationSettings(), {})]
[1, 1, 1]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import groupby

from aerorl_ops.config.generation import GenerationSettings
from aerorl_ops.rows.task_item import TaskItem


@dataclass(frozen=True)
class RowGroup:
    """Consecutive rows of a partition and the settings they are generated with."""

    rows: tuple[TaskItem, ...]
    settings: GenerationSettings


def row_groups(rows: Sequence[TaskItem], settings: GenerationSettings,
               max_new_tokens: Mapping[str, int]) -> list[RowGroup]:
    """``rows`` in order, cut where the new-token budget changes (a row's is ``max_new_tokens[row.dataset]``
    where its dataset sets one, else ``settings.max_new_tokens``) and where a run of video rows starts or ends."""
    def budget(row: TaskItem) -> int:
        return max_new_tokens.get(row.dataset) or settings.max_new_tokens

    return [RowGroup(tuple(group), settings if tokens == settings.max_new_tokens
                     else replace(settings, max_new_tokens=tokens))
            for (tokens, _), group in groupby(rows, key=lambda row: (budget(row), bool(row.video)))]
