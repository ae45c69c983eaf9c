"""Is the report database readable? Checked before long work starts, not at its final write.

:func:`check_report_database` opens the DuckDB file read-only (so nothing is ever written into a
damaged file), reads its catalog, and checks that the file holds every storage block its tables
point to (a truncated copy opens, then fails when a query reaches the missing blocks). A damaged
file raises :class:`DamagedDatabaseError`, one line naming the file and how to recover. An absent
file is fine (the first write creates it), and so is a file another process is writing right now
(its lock proves DuckDB opened it).
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from aerorl_ops.config.fields import ConfigError

HEADER_BYTES = 3 * 4096
"""DuckDB's file header and its two database headers, before the first storage block."""
IN_USE = ("Could not set lock on file", "different configuration")
"""DuckDB's errors for a file open elsewhere: a writer in another process, or a connection in this one."""


class DamagedDatabaseError(ConfigError):
    """The report database cannot be read; the message names the file and how to recover."""


def check_report_database(path: str | Path) -> None:
    """Raise :class:`DamagedDatabaseError` when ``path`` exists and is not a readable DuckDB database."""
    path = Path(path)
    if not path.exists():
        return
    try:
        with duckdb.connect(str(path), read_only=True) as conn:
            problem = missing_blocks(conn, path)
    except duckdb.Error as error:
        if any(sign in str(error) for sign in IN_USE):
            return
        problem = " ".join(str(error).split())
    if problem:
        raise DamagedDatabaseError(
            f"the report database {path} is damaged ({problem}); nothing was written to it. Move it aside "
            f"(mv {path} {path}.damaged) and run again: a new one is created, and the runs' cached data "
            "and checkpoints under data/ are intact, so a rerun refills the reports. To read what is left, "
            f"query a copy: cp {path} /tmp/copy.duckdb; aerorl sql --database /tmp/copy.duckdb \"SELECT …\"")


def missing_blocks(conn: duckdb.DuckDBPyConnection, path: Path) -> str:
    """Why ``path`` is shorter than its tables' storage needs; empty when it is not."""
    block_size = conn.execute("SELECT block_size FROM pragma_database_size() "
                              "WHERE database_name = current_database()").fetchone()[0]
    tables = conn.execute("SELECT schema_name, table_name FROM duckdb_tables() "
                          "WHERE database_name = current_database()").fetchall()
    last_block = -1
    for schema, table in tables:
        quoted = ".".join('"' + name.replace('"', '""') + '"' for name in (schema, table))
        block = conn.execute("SELECT max(block_id) FROM pragma_storage_info(?) WHERE persistent",
                             [quoted]).fetchone()[0]
        last_block = max(last_block, -1 if block is None else block)
    needed = HEADER_BYTES + (last_block + 1) * block_size
    size = path.stat().st_size
    return f"truncated: {size} bytes, its tables need {needed}" if size < needed else ""
