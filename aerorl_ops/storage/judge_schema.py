"""The judge reward's cache, ``judge_grades``: one row per graded (judge, template, question, reference,
response), so grading the same triple again costs no generate call.

``judge_identity`` names the judge's weights (its location and the size and modification time of
its files, ``scoring.judge_model.checkpoint_identity``): a retrained checkpoint in the same folder is
a new judge. ``status`` is ``ok`` (``score`` is the parsed grade), ``unparsable`` (``score`` is NULL,
``raw_reply`` says what the judge wrote) or ``timeout`` (never read back as a cached grade: the next
scoring asks again). ``ensure_tables(conn, JUDGE_TABLES)`` creates it where a judge runs.
"""

from __future__ import annotations

import pyarrow as pa

from aerorl_ops.storage.schema import TIMESTAMP, TableSpec, required

JUDGE_KEY_COLUMNS = ("judge_key", "judge_identity", "template_sha256", "question", "reference", "response")
"""The columns one cached grade is found by (``reference``: the accepted answers as a JSON list)."""

JUDGE_GRADES = TableSpec(
    "judge_grades",
    pa.schema([
        required("judge_key", pa.string()),
        required("judge_identity", pa.string()),
        required("template_sha256", pa.string()),
        required("question", pa.string()),
        required("reference", pa.string()),
        required("response", pa.string()),
        pa.field("score", pa.float64()),
        required("raw_reply", pa.string()),
        required("status", pa.string()),
        required("created_at", TIMESTAMP),
    ]),
    ("judge_key", "judge_identity", "template_sha256"),
)

JUDGE_TABLES = (JUDGE_GRADES,)
