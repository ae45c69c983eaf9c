"""Small helpers that turn results into metadata a person reads in the Dagster UI."""

from __future__ import annotations

import base64
from collections.abc import Sequence

import dagster as dg
import pandas as pd


def markdown_preview(frame: pd.DataFrame, rows: int = 8, max_chars: int = 60) -> dg.MetadataValue:
    """The first ``rows`` rows as a markdown table, long cells shortened."""
    shown = frame.head(rows).map(lambda v: (str(v)[: max_chars - 1] + "…") if len(str(v)) > max_chars else v)
    return dg.MetadataValue.md(shown.to_markdown(index=False) if not shown.empty else "_no rows_")


def counts_markdown(counts: Sequence[tuple[str, int]]) -> dg.MetadataValue:
    lines = ["| what | count |", "| --- | ---: |"] + [f"| {name} | {count} |" for name, count in counts]
    return dg.MetadataValue.md("\n".join(lines))


def inline_png(title: str, png: bytes | None, note: str = "nothing to plot") -> dg.MetadataValue:
    """A PNG as markdown with the image inline (the Dagster UI renders it); ``note`` when there is none."""
    if png is None:
        return dg.MetadataValue.md(f"_{title}: {note}_")
    return dg.MetadataValue.md(f"![{title}](data:image/png;base64,{base64.b64encode(png).decode()})")
