"""Metadata a person reads in the UI: floats to four significant digits, everything else as it was."""

import dagster as dg
import pandas as pd

from assets.metadata import markdown_preview, readable


def test_readable_rounds_plain_and_dagster_floats_and_leaves_the_rest():
    shown = readable({"samples_per_s": 0.006944444444444444, "tokens": dg.MetadataValue.float(123456.7),
                      "rows": 3, "ok": True, "run_id": "run-1", "missing": dg.MetadataValue.null()})
    assert shown == {"samples_per_s": 0.006944, "tokens": dg.MetadataValue.float(123500.0), "rows": 3, "ok": True,
                     "run_id": "run-1", "missing": dg.MetadataValue.null()}


def test_a_markdown_preview_shows_floats_to_four_significant_digits():
    frame = pd.DataFrame({"model": ["tiny"], "samples_per_s": [1 / 144], "tokens_per_s": [123456.7], "n": [96]})
    assert markdown_preview(frame).value.splitlines()[-1] == "| tiny    |        0.006944 |         123500 |  96 |"
