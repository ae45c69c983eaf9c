"""Small helpers that turn results into metadata a person reads in the Dagster UI."""

from __future__ import annotations

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
