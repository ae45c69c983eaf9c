"""The judge's grades cached in DuckDB (the ``judge_grades`` table, ``storage.judge_schema``).

A lookup joins the wanted triples against the table within one cache scope (judge, its weights,
the template) and returns the reusable grades (``ok`` and ``unparsable``); a store upserts each
graded triple, replacing an earlier row of the same key (a timed-out one, say). Values travel as
parameters and registered Arrow tables, never in SQL text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

import duckdb
import pyarrow as pa

from aerorl_ops.rewards.judge import REUSABLE, CacheScope, JudgeGrade, JudgeTriple
from aerorl_ops.storage.duckdb_store import ensure_tables, transaction, upsert_rows
from aerorl_ops.storage.judge_schema import JUDGE_GRADES, JUDGE_KEY_COLUMNS, JUDGE_TABLES
from aerorl_ops.storage.schema import output_schema

_WANTED = "_aerorl_judge_wanted"


def reference_json(reference: Sequence[str]) -> str:
    """The accepted answers as the ``reference`` column stores them.

    >>> reference_json(("red", "crimson"))
    '["red", "crimson"]'
    """
    return json.dumps(list(reference))


class DuckDBGradeCache:
    """Grades in ``conn``'s ``judge_grades`` table, created (or brought up to date) on construction."""

    def __init__(self, conn: duckdb.DuckDBPyConnection) -> None:
        self.conn = conn
        ensure_tables(conn, JUDGE_TABLES)

    def lookup(self, scope: CacheScope, triples: Sequence[JudgeTriple]) -> dict[JudgeTriple, JudgeGrade]:
        wanted = pa.table({"question": [t.question for t in triples],
                           "reference": [reference_json(t.reference) for t in triples],
                           "response": [t.response for t in triples]}, schema=pa.schema(
            [("question", pa.string()), ("reference", pa.string()), ("response", pa.string())]))
        self.conn.register(_WANTED, wanted)
        try:
            rows = self.conn.execute(
                f"SELECT g.question, g.reference, g.response, g.score, g.raw_reply, g.status "
                f"FROM {JUDGE_GRADES.name} g JOIN {_WANTED} w ON g.question = w.question "
                "AND g.reference = w.reference AND g.response = w.response "
                "WHERE g.judge_key = ? AND g.judge_identity = ? AND g.template_sha256 = ? "
                f"AND g.status IN ({', '.join('?' for _ in REUSABLE)})",
                [scope.judge_key, scope.judge_identity, scope.template_sha256, *REUSABLE]).fetchall()
        finally:
            self.conn.unregister(_WANTED)
        by_key = {(question, reference, response): JudgeGrade(score, raw_reply, status)
                  for question, reference, response, score, raw_reply, status in rows}
        found = {t: by_key.get((t.question, reference_json(t.reference), t.response)) for t in triples}
        return {triple: grade for triple, grade in found.items() if grade is not None}

    def store(self, scope: CacheScope, grades: Mapping[JudgeTriple, JudgeGrade]) -> None:
        created_at = datetime.now(UTC)
        rows = pa.Table.from_pylist([
            {"judge_key": scope.judge_key, "judge_identity": scope.judge_identity,
             "template_sha256": scope.template_sha256, "question": triple.question,
             "reference": reference_json(triple.reference), "response": triple.response, "score": grade.score,
             "raw_reply": grade.raw_reply, "status": grade.status, "created_at": created_at}
            for triple, grade in grades.items()], schema=output_schema(JUDGE_GRADES.schema))
        with transaction(self.conn):
            upsert_rows(self.conn, JUDGE_GRADES, JUDGE_KEY_COLUMNS, rows)
