"""`aerorl sql "SELECT …" [--csv | --json] [--database PATH]`: query the report database.

The venv has DuckDB's Python package but no ``duckdb`` command; this is the command. The
database (``reports/aerorl.duckdb`` unless ``--database`` says otherwise) is opened read-only,
so a query can never change a report, and a failing query or a missing database exits with a
message that names the database. While a writer holds the database (DuckDB lets one process write,
and then no other may open it), the query waits for it, up to ``LOCK_WAIT_S`` seconds.

Output: an aligned text table (NULL shown as ``NULL``), or CSV with a header row (NULL as an
empty field), or a JSON array with one object per row (NULL as ``null``, timestamps in ISO 8601).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import re
import sys
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from time import monotonic, sleep
from typing import NamedTuple

import duckdb

LOCK_WAIT_S = 5.0
REPORT_LOCK_WAIT_S = 30.0
"""How long a command's closing report (``aerorl bench``'s summary, ``aerorl eval``'s table) waits for another
command's write to the report database (a training run beside it) to end."""
"""How long a query waits for a writer's lock on the database to go (a report being written)."""
LOCKED = "Could not set lock on file"
"""DuckDB's error when another process holds the database for writing."""
READ_ONLY_CONFIG = {"enable_external_access": False, "lock_configuration": True}
"""No file but the database itself: ``COPY … TO``, ``ATTACH``, ``INSTALL``/``LOAD`` and ``read_csv('…')`` are
refused, and a query cannot turn it back on. Export goes through ``--csv`` / ``--json`` on stdout."""
FIRST_RETRY_S = 0.05
LONGEST_RETRY_S = 1.0


class SqlError(Exception):
    """A query that could not run; the message names the database and says why."""


class QueryResult(NamedTuple):
    columns: tuple[str, ...]
    rows: list[tuple]
    types: tuple[str, ...] = ()  # DuckDB type names, e.g. "VARCHAR", "JSON"


def run_query(database: Path, sql: str, lock_wait_s: float | None = None,
              pause: Callable[[float], None] = sleep) -> QueryResult:
    """Run ``sql`` on ``database`` opened read-only; its last statement's result. A writer's lock is
    waited for up to ``lock_wait_s`` seconds (``LOCK_WAIT_S`` by default), retrying with backoff
    (``pause`` sleeps between tries)."""
    if not database.is_file():
        raise SqlError(f"no report database at {database}: run `aerorl bench` first, or pass --database PATH")
    try:
        with connect_when_unlocked(database, LOCK_WAIT_S if lock_wait_s is None else lock_wait_s, pause) as conn:
            cursor = conn.execute(sql)
            if cursor.description is None:  # a statement without a result (SET, PRAGMA ...)
                return QueryResult((), [])
            return QueryResult(tuple(column[0] for column in cursor.description), cursor.fetchall(),
                               tuple(str(column[1]) for column in cursor.description))
    except duckdb.PermissionException as error:
        raise SqlError(f"refused: aerorl sql reads the report database {database} and nothing else (no COPY TO, "
                       f"ATTACH, INSTALL or other files; export with --csv or --json): "
                       f"{str(error).splitlines()[0]}") from error
    except duckdb.Error as error:
        raise SqlError(f"query failed on {database}: {error}") from error


def connect_when_unlocked(database: Path, lock_wait_s: float,
                          pause: Callable[[float], None]) -> duckdb.DuckDBPyConnection:
    """A read-only connection to ``database``, retried while a writer holds it, until ``lock_wait_s``."""
    deadline = monotonic() + lock_wait_s
    delay = FIRST_RETRY_S
    while True:
        try:
            return duckdb.connect(str(database), read_only=True, config=READ_ONLY_CONFIG)
        except duckdb.Error as error:
            if LOCKED not in str(error):
                raise
            left = deadline - monotonic()
            if left <= 0:
                holder = re.search(r"held in (.*?)\. See also", str(error))
                raise SqlError(f"{database} is locked by a writer ({holder.group(1) if holder else 'another process'})"
                               f" and stayed locked for {lock_wait_s:g} s: run the query again when its write "
                               "ends") from error
            pause(min(delay, left))
            delay = min(2 * delay, LONGEST_RETRY_S)


def _text(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    return str(value)


def format_table(result: QueryResult) -> str:
    """An aligned text table: a header, a rule, one line per row (numbers right-aligned), a count.
    Floats are shown to 4 significant digits (``aerorl_ops.text.numbers``); ``--csv`` and ``--json``
    print every digit.

    >>> print(format_table(QueryResult(("model", "samples", "rate"), [("tiny", 96, 1 / 144), ("big", None, None)])))
    model | samples | rate
    ------+---------+---------
    tiny  |      96 | 0.006944
    big   |    NULL |     NULL
    (2 rows)
    """
    from aerorl_ops.text.numbers import significant

    if not result.columns:
        return "OK"
    cells = [[_text(significant(value) if isinstance(value, float) else value) for value in row]
             for row in result.rows]
    widths = [max([len(name)] + [len(row[i]) for row in cells]) for i, name in enumerate(result.columns)]
    numeric = [all(isinstance(row[i], (int, float, Decimal)) or row[i] is None for row in result.rows)
               for i in range(len(result.columns))]
    lines = [" | ".join(name.ljust(width) for name, width in zip(result.columns, widths, strict=True)).rstrip(),
             "-+-".join("-" * width for width in widths)]
    for row in cells:
        lines.append(" | ".join(cell.rjust(width) if right else cell.ljust(width)
                                for cell, width, right in zip(row, widths, numeric, strict=True)).rstrip())
    count = len(result.rows)
    lines.append(f"({count} row{'' if count == 1 else 's'})")
    return "\n".join(lines)


def format_csv(result: QueryResult) -> str:
    """CSV with a header row; NULL is an empty field.

    >>> format_csv(QueryResult(("a", "b"), [(1, None), ("x,y", 2.5)]))
    'a,b\\r\\n1,\\r\\n"x,y",2.5\\r\\n'
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(result.columns)
    writer.writerows([["" if value is None else _text(value) for value in row] for row in result.rows])
    return buffer.getvalue()


def _json_value(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (list, tuple)):
        return [_json_value(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _json_value(item) for key, item in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def format_json(result: QueryResult) -> str:
    """A JSON array, one object per row, keyed by column name; a JSON column's values are nested.

    >>> format_json(QueryResult(("a", "b", "c"), [(1, None, '{"x": 2}')], ("INTEGER", "VARCHAR", "JSON")))
    '[{"a": 1, "b": null, "c": {"x": 2}}]'
    """
    nested = [kind == "JSON" for kind in result.types] or [False] * len(result.columns)
    return json.dumps([{name: json.loads(value) if is_json and isinstance(value, str) else _json_value(value)
                        for name, value, is_json in zip(result.columns, row, nested, strict=True)}
                       for row in result.rows], ensure_ascii=False)


FORMATS = {"table": format_table, "csv": format_csv, "json": format_json}


def add_sql_command(commands: argparse._SubParsersAction) -> None:
    """Register ``sql`` on the ``aerorl`` command line."""
    sql = commands.add_parser("sql", help="query the report database, read-only (a table, --csv or --json)")
    sql.add_argument("query", help='SQL to run, e.g. "SELECT * FROM latest_benchmark_summary"')
    output = sql.add_mutually_exclusive_group()
    output.add_argument("--csv", dest="output", action="store_const", const="csv", help="print CSV")
    output.add_argument("--json", dest="output", action="store_const", const="json", help="print a JSON array")
    sql.add_argument("--database", type=Path, help="the DuckDB file (default: the report database, "
                                                   "reports/aerorl.duckdb)")
    sql.set_defaults(handler=sql_command, output="table")


def sql_command(args: argparse.Namespace) -> int:
    """Print the query's result; 1 with a message on stderr when it cannot run."""
    database = args.database
    if database is None:
        from assets.project import DUCKDB_PATH

        database = DUCKDB_PATH
    from aerorl_ops.storage.database_check import DamagedDatabaseError, check_report_database

    try:
        check_report_database(database)  # a damaged file is named, not half-read
    except DamagedDatabaseError as error:
        print(f"aerorl sql: {error}", file=sys.stderr)
        return 2
    try:
        result = run_query(Path(database), args.query)
    except SqlError as error:
        print(f"aerorl sql: {error}", file=sys.stderr)
        return 1
    text = FORMATS[args.output](result)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0

