"""Small helpers that turn results into metadata a person reads in the Dagster UI.

Floats are shown to 4 significant digits (``aerorl_ops.text.numbers.significant``): ``readable`` rounds
the floats of a metadata dict, ``markdown_preview`` those of a table; DuckDB keeps every digit.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence

import dagster as dg
import pandas as pd

from aerorl_ops.text.numbers import significant


def readable(metadata: Mapping[str, object]) -> dict[str, object]:
    """``metadata`` with every float, plain or ``MetadataValue.float``, rounded to 4 significant digits.

    >>> readable({"rate": 0.006944444444444444, "n": 3, "tokens": dg.MetadataValue.float(123456.7)})
    {'rate': 0.006944, 'n': 3, 'tokens': FloatMetadataValue(value=123500.0)}
    """
    return {name: _readable(value) for name, value in metadata.items()}


def _readable(value: object) -> object:
    if isinstance(value, float):
        return significant(value)
    if isinstance(value, dg.FloatMetadataValue) and value.value is not None:
        return dg.MetadataValue.float(significant(value.value))
    return value


def markdown_preview(frame: pd.DataFrame, rows: int = 8, max_chars: int = 60) -> dg.MetadataValue:
    """The first ``rows`` rows as a markdown table, floats to 4 significant digits, long cells shortened."""
    shown = frame.head(rows).map(lambda v: significant(v) if isinstance(v, float) else
                                 (str(v)[: max_chars - 1] + "…") if len(str(v)) > max_chars else v)
    return dg.MetadataValue.md(shown.to_markdown(index=False) if not shown.empty else "_no rows_")


def counts_markdown(counts: Sequence[tuple[str, int]]) -> dg.MetadataValue:
    lines = ["| what | count |", "| --- | ---: |"] + [f"| {name} | {count} |" for name, count in counts]
    return dg.MetadataValue.md("\n".join(lines))


def inline_png(title: str, png: bytes | None, note: str = "nothing to plot") -> dg.MetadataValue:
    """A PNG as markdown with the image inline (the Dagster UI renders it); ``note`` when there is none."""
    if png is None:
        return dg.MetadataValue.md(f"_{title}: {note}_")
    return dg.MetadataValue.md(f"![{title}](data:image/png;base64,{base64.b64encode(png).decode()})")
