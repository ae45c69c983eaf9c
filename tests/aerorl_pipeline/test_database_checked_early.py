"""Distributed partition runs check the report database before any partition starts."""

from __future__ import annotations

import dagster as dg
import pytest

from aerorl_ops.storage.database_check import DamagedDatabaseError
from aerorl_pipeline.distributed_bench import BenchResources, run_partitions


def test_a_damaged_report_database_stops_the_partitions_before_any_starts(tmp_path):
    database = tmp_path / "aerorl.duckdb"
    database.write_bytes(b"not a database" * 100)
    with dg.instance_for_test() as instance:
        with pytest.raises(DamagedDatabaseError, match=f"the report database {database} is damaged"):
            run_partitions(tmp_path / "missing.toml", BenchResources(database=str(database)), instance,
                           ["1|tiny-qwen2-vl"], {}, {}, parallel=1)
        assert instance.get_runs() == []  # no run launched
    assert database.read_bytes() == b"not a database" * 100
