"""Reliability: fuzzed config files and rows files (issue 38, item 5), a few hundred cases.

The strategies (``fuzz_configs``, ``fuzz_rows``) mutate the shipped config and MAYE / verl rows files; the
property (``fuzz_outcomes``) runs each case in-process through what ``aerorl bench`` calls, with model loading
refused: every case is accepted (rows: each record a row or a rejection with a one-line reason, none lost) or
refused by one of the project's input errors whose message names the input in at most 3 lines. Any other
exception, a warning, a hang (30 s), a lost record or a row reading an image outside its folder fails. A few cases go
through the real ``aerorl bench`` process too: exit 2, at most 3 lines on stderr, no traceback, and the report
database as it was. ``benchmarks/bench_fuzz_inputs.py`` runs 10,000 cases.
"""

from __future__ import annotations

import doctest
import hashlib
import json
import math
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import duckdb
import fuzz_configs
import pytest
from fuzz_configs import config_cases, mutated_documents, toml_text, write_config_case
from fuzz_outcomes import FAILURE, REJECTED, config_outcome, rows_outcome
from fuzz_rows import DATASET, jsonl_cases, parquet_cases, write_rows_case
from hypothesis import HealthCheck, assume, given, settings
from model_loads import refuse_model_loads

from aerorl_ops.rows.load_result import RejectedRow
from aerorl_ops.storage.duckdb_store import ensure_tables, rejected_rows_table, replace_partition
from aerorl_ops.storage.schema import REJECTED_ROWS

DRIVER = Path(__file__).with_name("command_driver.py")
FUZZ = settings(derandomize=True, database=None, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
"""Deterministic (no example database, a fixed derandomized sequence); hangs are caught per case
(``fuzz_outcomes.time_limit``), not by a deadline that a busy machine would trip."""


@pytest.fixture(autouse=True)
def model_loads(monkeypatch) -> list[str]:
    calls = refuse_model_loads(monkeypatch)
    yield calls
    assert calls == [], f"a model load happened: {calls}"


def passes(outcome) -> None:
    assert outcome.verdict != FAILURE, f"{outcome.signature}: {outcome.detail}"


def comparable(value: object) -> object:
    """``value`` with each nan replaced by a marker (nan equals nothing)."""
    if isinstance(value, float) and math.isnan(value):
        return "<nan>"
    if isinstance(value, dict):
        return {key: comparable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [comparable(item) for item in value]
    return value


@settings(FUZZ, max_examples=50)
@given(mutated_documents())
def test_a_mutated_document_is_written_as_toml_that_reads_back_the_same(drawn):
    document, _ = drawn  # so its mutations reach the settings' checks, not the TOML parser
    assert comparable(tomllib.loads(toml_text(document))) == comparable(document)
    assert doctest.testmod(fuzz_configs).failed == 0


@settings(FUZZ, max_examples=200)
@given(config_cases)
def test_a_fuzzed_config_file_is_accepted_or_refused_in_one_line(case):
    passes(config_outcome(case))


@settings(FUZZ, max_examples=100)
@given(jsonl_cases())
def test_every_fuzzed_jsonl_record_is_a_row_or_a_rejection(case):
    passes(rows_outcome(case))


@settings(FUZZ, max_examples=100)
@given(parquet_cases())
def test_every_fuzzed_parquet_record_is_a_row_or_a_rejection(case):
    passes(rows_outcome(case))


# --- through the real command -------------------------------------------------------------------------------

def aerorl_bench(root: Path, models_dir: Path, config: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(DRIVER), "--root", str(root), "--models-dir", str(models_dir), "--",
                           "bench", "--config", str(config)], env={**os.environ, "DAGSTER_HOME": str(root / "home")},
                          capture_output=True, text=True, timeout=300)


def report_with_a_row(root: Path) -> Path:
    """The isolated report database, holding one ``rejected_rows`` row of an earlier run."""
    root.mkdir(parents=True)
    database = root / "aerorl.duckdb"
    with duckdb.connect(str(database)) as conn:
        ensure_tables(conn)
        earlier = [RejectedRow("earlier.jsonl", "earlier.jsonl#line=1", "q1", "no answers")]
        replace_partition(conn, REJECTED_ROWS, {"run_id": "earlier", "stage": "shapes_rows", "dataset": "shapes"},
                          rejected_rows_table("earlier", "shapes_rows", "shapes", earlier))
    return database


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` but the Dagster home, by its SHA-256."""
    return {str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*")) if path.is_file() and "home" not in path.relative_to(root).parts}


def one_line_exit_2(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert 1 <= len(lines) <= 3 and lines[0].startswith("aerorl: configuration error: "), done.stderr
    assert "Traceback" not in done.stderr
    return done.stderr


@pytest.mark.slow
@settings(FUZZ, max_examples=3)
@given(config_cases)
def test_a_refused_config_is_one_line_from_the_command_and_writes_nothing(tmp_path_factory, models_dir, case):
    assume(config_outcome(case).verdict == REJECTED)
    folder = tmp_path_factory.mktemp("fuzzed-config")
    config = write_config_case(case, folder)
    root = folder / "root"
    report_with_a_row(root)
    before = snapshot(root)

    one_line_exit_2(aerorl_bench(root, models_dir, config))

    assert snapshot(root) == before  # no table created, dropped or half-written; no other file


@pytest.mark.slow
@settings(FUZZ, max_examples=1)
@given(jsonl_cases())
def test_a_rows_file_without_a_usable_row_is_one_line_and_every_rejection_is_recorded(tmp_path_factory,
                                                                                      models_dir, case):
    outcome = rows_outcome(case)
    assume(outcome.verdict == REJECTED and outcome.rejected > 0)
    folder = tmp_path_factory.mktemp("fuzzed-rows")
    dataset = write_rows_case(case, folder)
    config = folder / "bench.toml"
    config.write_text(f'[benchmark]\nbatch_sizes = [1]\n\n[models.tiny-qwen2-vl]\nsource = "embedded:tiny-qwen2-vl"\n\n'
                      f'[datasets.{DATASET}]\nkind = "jsonl"\npath = {json.dumps(dataset.path)}\n'
                      + "".join(f"{key} = {json.dumps(value)}\n" for key, value in dataset.settings.items())
                      + ("" if dataset.limit is None else f"limit = {dataset.limit}\n"))
    root = folder / "root"
    database = report_with_a_row(root)

    stderr = one_line_exit_2(aerorl_bench(root, models_dir, config))

    assert f"dataset '{DATASET}'" in stderr and "has no usable row" in stderr
    with duckdb.connect(str(database), read_only=True) as conn:
        recorded = conn.execute("SELECT count(*) FROM rejected_rows WHERE dataset = ?", [DATASET]).fetchone()[0]
        earlier = conn.execute("SELECT count(*) FROM rejected_rows WHERE run_id = 'earlier'").fetchone()[0]
        generated = conn.execute("SELECT count(*) FROM generations").fetchone()[0]
    assert (recorded, earlier, generated) == (outcome.rejected, 1, 0)
