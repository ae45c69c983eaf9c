"""The library-bump canary's version comparison (``reporting.library_canary``)."""

from __future__ import annotations

import json

import duckdb

from aerorl_ops.reporting.library_canary import VersionChange, run_library_versions, version_changes
from aerorl_ops.storage.duckdb_store import ensure_tables


def test_only_the_canary_packages_count_and_a_missing_one_is_a_change():
    before = {"torch": "2.13.0", "transformers": "5.4.0", "pandas": "2.0", "peft": "0.17.0"}
    after = {"torch": "2.13.0", "transformers": "5.5.3", "pandas": "3.0", "vllm": "0.32.0"}
    assert version_changes(before, after) == (
        VersionChange("transformers", "5.4.0", "5.5.3"), VersionChange("vllm", "not recorded", "0.32.0"),
        VersionChange("peft", "0.17.0", "not recorded"))
    assert str(version_changes(before, after)[0]) == "transformers 5.4.0 -> 5.5.3"
    assert version_changes(before, dict(before)) == ()


def test_a_runs_versions_come_from_the_runs_table():
    with duckdb.connect() as conn:
        ensure_tables(conn)
        conn.execute("INSERT INTO runs (run_id, kind, library_versions) VALUES ('r1', 'benchmark', ?)",
                     [json.dumps({"torch": "2.13.0"})])
        assert run_library_versions(conn, "r1") == {"torch": "2.13.0"}
        assert run_library_versions(conn, "missing") == {}
