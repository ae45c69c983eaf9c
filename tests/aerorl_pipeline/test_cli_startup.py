"""`aerorl -h`, `aerorl sql` and argument errors start fast: none imports torch, transformers or
Dagster (each a second or more to import); the commands that do the work import them when they run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "dagster")
PROBE = f"""
import sys
from aerorl_pipeline.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
print(code, sorted(name for name in {HEAVY!r} if name in sys.modules))
"""


def run_cli(*argv: str) -> tuple[str, str]:
    """``aerorl *argv`` in a fresh interpreter: its output and a last line ``<exit code> <heavy modules loaded>``."""
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    *output, last = done.stdout.splitlines()
    return "\n".join(output), last


@pytest.mark.parametrize(("argv", "code"), [
    (["-h"], 0),
    (["bogus"], 2),
    (["train", "--steps", "notanumber"], 2),
    (["train", "-h"], 0),
    (["bench", "-h"], 0),
    (["eval", "-h"], 0),
    (["worker", "-h"], 0),
    (["dev", "-h"], 0),
])
def test_help_and_argument_errors_import_nothing_heavy(argv, code):
    _, last = run_cli(*argv)
    assert last == f"{code} []"


def test_a_query_imports_nothing_heavy(tmp_path):
    database = tmp_path / "report.duckdb"
    with duckdb.connect(str(database)) as conn:
        conn.execute("CREATE TABLE summary AS SELECT 'tiny' AS model_key, 8 AS batch_size")
    output, last = run_cli("sql", "SELECT model_key, batch_size FROM summary", "--database", str(database), "--csv")
    assert (output, last) == ("model_key,batch_size\ntiny,8", "0 []")
