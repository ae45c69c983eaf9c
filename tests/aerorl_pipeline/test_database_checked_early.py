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


@pytest.mark.parametrize("argv", [["train"], ["train", "--preset", "quick"], ["bench"], ["eval"]])
def test_each_command_names_a_damaged_database_before_any_work(tmp_path, monkeypatch, capsys, argv):
    import assets.project as project
    from aerorl_pipeline import cli

    database = tmp_path / "aerorl.duckdb"
    database.write_bytes(b"not a database" * 100)
    monkeypatch.setattr(project, "DUCKDB_PATH", database)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "never_created"))

    def no_work(*args, **kwargs):
        raise AssertionError("work started before the report database was checked")
    monkeypatch.setattr("aerorl_ops.rl.run.inputs.check_training_inputs", no_work)
    monkeypatch.setattr("aerorl_pipeline.evaluate.check_inputs", no_work)
    monkeypatch.setattr("aerorl_pipeline.instance.local_instance", no_work)
    extra = ["--database", str(database)] if argv == ["eval"] else []
    assert cli.main([*argv, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"aerorl: configuration error: the report database {database} is damaged (")
    assert err.count("\n") == 1 and not (tmp_path / "never_created").exists()
