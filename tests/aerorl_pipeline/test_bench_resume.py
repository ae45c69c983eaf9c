"""`aerorl bench --run-id ID` again goes on where the benchmark run stopped (``aerorl_pipeline.bench_resume``): a
partition that run finished, with the same settings and rows, is not run again; another setting, a failed
partition or ``--redo`` runs it. Real commands, in this process, on the tiny model (2 rows, 2 new tokens)."""

from __future__ import annotations

import dagster as dg
import duckdb
import pytest

from assets.runs import BENCHMARK_RUN_TAG

CONFIG = """
[benchmark]
batch_sizes = [1, 2]

[models.tiny]
source = "{model}"

[datasets.docvqa]
kind = "docvqa"
limit = 2
"""


@pytest.fixture
def bench(isolated_commands, tiny_model_dir, tmp_path, capsys):
    """``aerorl bench`` with the test's config and run id ``r``; its exit code and what it printed."""
    from aerorl_pipeline import cli

    config = tmp_path / "bench.toml"
    config.write_text(CONFIG.format(model=tiny_model_dir))

    def run(*flags: str) -> tuple[int, str]:
        code = cli.main(["bench", "--config", str(config), "--run-id", "r", "--max-new-tokens", "2", *flags])
        return code, capsys.readouterr().out

    return run


def partition_runs() -> list[str]:
    """The partition of each Dagster run of benchmark run ``r``, oldest first."""
    with dg.DagsterInstance.get() as instance:
        runs = instance.get_runs(filters=dg.RunsFilter(tags={BENCHMARK_RUN_TAG: "r"}))
    return [run.tags["dagster/partition"] for run in reversed(runs) if "dagster/partition" in run.tags]


def generations(database) -> list[tuple]:
    with duckdb.connect(str(database), read_only=True) as conn:
        return conn.execute("SELECT batch_size, count(*), count(DISTINCT sample_id), min(dagster_run_id) FROM "
                            "generations WHERE run_id = 'r' GROUP BY batch_size ORDER BY batch_size").fetchall()


@pytest.mark.slow
def test_a_rerun_skips_the_finished_partitions_and_reruns_those_that_differ(bench, isolated_commands):
    database = isolated_commands.duckdb_path
    assert bench()[0] == 0
    first = generations(database)
    assert [(size, rows, distinct) for size, rows, distinct, _ in first] == [(1, 2, 2), (2, 2, 2)]
    assert partition_runs() == ["1|tiny", "2|tiny"]

    code, out = bench()  # the same command: nothing left to run
    assert code == 0
    assert ("benchmark run r: 2 of 2 partitions already finished (1|tiny, 2|tiny): nothing left to run (--redo runs "
            "every one again)") in out
    assert partition_runs() == ["1|tiny", "2|tiny"] and generations(database) == first

    code, out = bench("--max-new-tokens", "3")  # another setting: every partition runs again
    assert code == 0 and "already finished" not in out
    assert partition_runs() == ["1|tiny", "2|tiny"] * 2
    assert [row[:3] for row in generations(database)] == [(1, 2, 2), (2, 2, 2)]  # each sample once

    code, out = bench("--max-new-tokens", "3", "--redo")
    assert code == 0 and "already finished" not in out
    assert partition_runs() == ["1|tiny", "2|tiny"] * 3


@pytest.mark.slow
def test_a_partition_whose_run_failed_runs_again(bench, isolated_commands, monkeypatch):
    import assets.benchmark.reports as reports

    write = reports.write_report

    def fail_at_batch_size_2(context, *args, **kwargs):
        if str(context.partition_key) == "2|tiny":
            raise OSError("disk full")
        return write(context, *args, **kwargs)

    monkeypatch.setattr(reports, "write_report", fail_at_batch_size_2)
    assert bench()[0] == 1
    monkeypatch.setattr(reports, "write_report", write)
    code, out = bench()
    assert code == 0
    assert "benchmark run r: 1 of 2 partitions already finished (1|tiny): running the other 1" in out
    assert partition_runs() == ["1|tiny", "2|tiny", "2|tiny"]
    assert [row[:3] for row in generations(isolated_commands.duckdb_path)] == [(1, 2, 2), (2, 2, 2)]
