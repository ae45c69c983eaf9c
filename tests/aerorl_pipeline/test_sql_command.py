"""`aerorl sql`: query the report database read-only, as a table, CSV or JSON; clear errors."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from aerorl_pipeline import sql as sql_module
from aerorl_pipeline.cli import main
from aerorl_pipeline.sql import FIRST_RETRY_S, run_query

QUERY = "SELECT model_key, batch_size, pass_rate, note, settings, created_at FROM summary ORDER BY batch_size"


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "report.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE summary (model_key VARCHAR, batch_size INTEGER, pass_rate DOUBLE, note VARCHAR, "
                     "settings JSON, created_at TIMESTAMPTZ)")
        conn.executemany("INSERT INTO summary VALUES (?, ?, ?, ?, ?, ?)", [
            ("tiny", 8, 0.25, 'a, "quoted" note', '{"weights": {"cost": 0.1}}',
             datetime(2026, 3, 4, 2, 30, tzinfo=UTC)),
            ("tiny", 1, None, None, None, None),
        ])
    return path


def sql(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["sql", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_prints_an_aligned_table(capsys, database):
    code, out, err = sql(capsys, "SELECT model_key, batch_size, pass_rate, note FROM summary ORDER BY batch_size",
                         "--database", str(database))
    assert (code, err) == (0, "")
    assert out == (
        "model_key | batch_size | pass_rate | note\n"
        "----------+------------+-----------+-----------------\n"
        "tiny      |          1 |      NULL | NULL\n"
        'tiny      |          8 |      0.25 | a, "quoted" note\n'
        "(2 rows)\n"
    )


ROUNDING = "SELECT 1 / 144 AS rate, 123456.7::DOUBLE AS tokens, 12::DOUBLE AS whole, 7 AS n"


def test_the_table_shows_floats_to_4_significant_digits_and_csv_and_json_keep_every_digit(capsys, database):
    _, table, _ = sql(capsys, ROUNDING, "--database", str(database))
    assert table.splitlines()[2] == "0.006944 | 123500.0 |  12.0 | 7"
    _, csv_text, _ = sql(capsys, ROUNDING, "--csv", "--database", str(database))
    assert csv_text.splitlines()[1] == "0.006944444444444444,123456.7,12.0,7"
    _, json_text, _ = sql(capsys, ROUNDING, "--json", "--database", str(database))
    assert json.loads(json_text) == [{"rate": 1 / 144, "tokens": 123456.7, "whole": 12.0, "n": 7}]


def test_prints_csv(capsys, database):
    code, out, _ = sql(capsys, QUERY, "--csv", "--database", str(database))
    assert code == 0
    assert list(csv.reader(io.StringIO(out))) == [
        ["model_key", "batch_size", "pass_rate", "note", "settings", "created_at"],
        ["tiny", "1", "", "", "", ""],
        ["tiny", "8", "0.25", 'a, "quoted" note', '{"weights": {"cost": 0.1}}', "2026-03-04T02:30:00+00:00"],
    ]


def test_prints_json_with_json_columns_nested(capsys, database):
    code, out, _ = sql(capsys, QUERY, "--json", "--database", str(database))
    assert code == 0
    assert json.loads(out) == [
        {"model_key": "tiny", "batch_size": 1, "pass_rate": None, "note": None, "settings": None,
         "created_at": None},
        {"model_key": "tiny", "batch_size": 8, "pass_rate": 0.25, "note": 'a, "quoted" note',
         "settings": {"weights": {"cost": 0.1}}, "created_at": "2026-03-04T02:30:00+00:00"},
    ]


def test_bad_sql_exits_non_zero_naming_the_database_and_the_error(capsys, database):
    code, out, err = sql(capsys, "SELEC 1", "--database", str(database))
    assert code == 1 and out == ""
    assert err.startswith(f"aerorl sql: query failed on {database}: Parser Error")
    code, _, err = sql(capsys, "SELECT missing_column FROM summary", "--database", str(database))
    assert code == 1 and "missing_column" in err


def test_the_database_is_opened_read_only(capsys, database):
    code, _, err = sql(capsys, "DELETE FROM summary", "--database", str(database))
    assert code == 1 and "read-only" in err
    with duckdb.connect(str(database), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM summary").fetchone() == (2,)


def test_a_missing_database_is_named(capsys, tmp_path):
    missing = tmp_path / "nowhere.duckdb"
    code, out, err = sql(capsys, "SELECT 1", "--database", str(missing))
    assert code == 1 and out == ""
    assert err == f"aerorl sql: no report database at {missing}: run `aerorl bench` first, or pass --database PATH\n"
    assert not missing.exists()


def test_the_default_database_is_the_report_database(capsys, monkeypatch, database):
    import assets.project

    monkeypatch.setattr(assets.project, "DUCKDB_PATH", database)
    code, out, _ = sql(capsys, "SELECT count(*) AS n FROM summary", "--csv")
    assert (code, out) == (0, "n\r\n2\r\n")


def test_csv_and_json_cannot_be_combined(capsys, database):
    with pytest.raises(SystemExit) as exit_info:
        main(["sql", "SELECT 1", "--csv", "--json", "--database", str(database)])
    assert exit_info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


WRITER = """
import sys
import duckdb
conn = duckdb.connect(sys.argv[1])  # read-write: DuckDB's lock, no other process may open the file
print("locked", flush=True)
sys.stdin.readline()
conn.close()
print("released", flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def writer(database):
    """Another process holding ``database`` for writing until the test tells it to let go."""
    process = subprocess.Popen([sys.executable, "-c", WRITER, str(database)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "locked\n"
    yield process
    process.kill()
    process.wait()


def release(process: subprocess.Popen) -> None:
    process.stdin.write("\n")
    process.stdin.flush()
    assert process.stdout.readline() == "released\n"


def test_a_query_during_a_writers_hold_waits_for_it_and_succeeds(database, writer):
    pauses = []

    def pause(seconds: float) -> None:  # the first retry finds the lock; the writer lets go before the next
        pauses.append(seconds)
        if len(pauses) == 1:
            release(writer)

    result = run_query(database, "SELECT count(*) AS n FROM summary", lock_wait_s=60.0, pause=pause)
    assert result.rows == [(2,)]
    assert pauses == [FIRST_RETRY_S]


def test_a_writers_hold_that_outlasts_the_wait_fails_with_one_line_naming_the_lock(capsys, database, writer,
                                                                                    monkeypatch):
    monkeypatch.setattr(sql_module, "LOCK_WAIT_S", 0.5)
    code, out, err = sql(capsys, "SELECT count(*) FROM summary", "--database", str(database))
    assert (code, out) == (1, "")
    assert err.startswith(f"aerorl sql: {database} is locked by a writer (")
    assert f"(PID {writer.pid})) and stayed locked for 0.5 s: run the query again when its write ends" in err
    assert err.count("\n") == 1



@pytest.mark.parametrize(("query", "target"), [
    ("COPY summary TO '{dir}/out.csv'", "out.csv"),
    ("ATTACH '{dir}/other.duckdb' AS other", "other.duckdb"),
    ("EXPORT DATABASE '{dir}/exported'", "exported"),
    ("SELECT * FROM read_csv('/etc/passwd')", None),
    ("INSTALL httpfs", None),
])
def test_a_query_that_reaches_outside_the_database_is_refused_in_one_line(capsys, database, tmp_path, query, target):
    code, out, err = sql(capsys, query.format(dir=tmp_path), "--database", str(database))
    assert (code, out) == (1, "")
    assert err.startswith(f"aerorl sql: refused: aerorl sql reads the report database {database} and nothing "
                          "else (no COPY TO, ATTACH, INSTALL or other files; export with --csv or --json): ")
    assert err.count("\n") == 1
    if target is not None:
        assert not (tmp_path / target).exists()


def test_a_query_cannot_turn_external_access_back_on(capsys, database):
    code, _, err = sql(capsys, "SET enable_external_access = true", "--database", str(database))
    assert code == 1 and "the configuration has been locked" in err


def test_a_damaged_database_is_named_with_how_to_recover(capsys, database):
    with database.open("r+b") as handle:  # a truncated copy: opens, then fails where its blocks are missing
        handle.truncate(3 * 4096 + 100)
    code, out, err = sql(capsys, "SELECT count(*) FROM summary", "--database", str(database))
    assert (code, out) == (2, "")
    assert err.startswith(f"aerorl sql: the report database {database} is damaged (")
    assert f"query a copy: cp {database} /tmp/copy.duckdb; aerorl sql --database /tmp/copy.duckdb" in err
