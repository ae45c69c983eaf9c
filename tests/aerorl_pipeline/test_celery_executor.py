"""``[executor] kind = "celery"``: benchmark partitions on a real Celery engine.

The test starts two partition workers and the report writer (``celery -A dagster_celery.app worker``,
one step at a time each) on Celery's folder broker, and ``aerorl bench``'s distributed path launches
the partition runs concurrently. It checks:

* the workers are configured to take one step at a time (concurrency 1, prefetch 1, acknowledged
  late) and are all consuming before the first step is sent, so each of the two partition workers ran
  exactly one partition's generation step, in two different processes; and the report writer, not a
  partition worker, ran every step that opens DuckDB;
* the DuckDB report equals the one an in-process run of the same config writes: same rows, same
  responses and scores (timing and telemetry columns left out: they are measurements);
* a worker process SIGKILLed mid-generation fails its run (not a hang), leaves no rows and no Parquet
  of that partition, and the rerun lands every row exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import dagster as dg
import duckdb
import pytest

pytest.importorskip("dagster_celery", reason="dagster-celery is the scale-out extra: pip install -e '.[distributed]'")

from aerorl_ops.storage.behaviour_rows import behaviour_rows  # noqa: E402
from aerorl_pipeline.bench import plan_bench, run_bench, run_bench_distributed  # noqa: E402
from aerorl_pipeline.celery_workers import wait_until_ready, worker_command  # noqa: E402
from aerorl_pipeline.definitions import build_definitions  # noqa: E402
from aerorl_pipeline.distributed_bench import BenchResources, resources_of  # noqa: E402
from aerorl_pipeline.executors import celery_app, prepare_folders  # noqa: E402
from assets.project import load_config  # noqa: E402
from assets.runs import BENCHMARK_RUN_TAG  # noqa: E402
from assets.step_placement import PARTITION_QUEUE  # noqa: E402

pytestmark = pytest.mark.slow

ROWS = 48  # easy-VQA test questions: enough generation (a few seconds) for two partitions to overlap
CONFIG = """
[benchmark]
batch_sizes = [1, 2]
[datasets.easy_vqa]
kind = "easy_vqa"
split = "test"
limit = {rows}
[models.tiny-qwen2-vl]
source = "embedded:tiny-qwen2-vl"
[generation]
max_new_tokens = 6
[rewards]
latency_budget_ms = 1e9  # the cost reward then depends on no timing: scores compare exactly
[executor]
kind = "{kind}"
celery_dir = "{celery_dir}"
workers = 2
[storage]
cache_url = "{cache}"
"""
REPORT_TABLES = ("generations", "reward_scores", "benchmark_summary", "rejected_rows")


def write_config(folder: Path, kind: str, rows: int = ROWS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "bench.toml"
    path.write_text(CONFIG.format(rows=rows, kind=kind, celery_dir=folder / "celery", cache=folder / "cache"))
    return path


def resources(folder: Path, models_dir: Path) -> BenchResources:
    return BenchResources(database=str(folder / "aerorl.duckdb"), models_dir=str(models_dir), device="cpu",
                          torch_threads=1)


def report(database: Path, run_id: str) -> dict[str, list[tuple]]:
    """Every report table's rows of ``run_id``, measured columns left out."""
    return behaviour_rows(str(database), run_id, REPORT_TABLES)


def step_events(instance: dg.DagsterInstance, run_id: str, step: str, event_type: dg.DagsterEventType) -> list:
    return [entry for entry in instance.all_logs(run_id, of_type=event_type) if entry.step_key == step]


@pytest.fixture
def celery_bench(tmp_path: Path, models_dir: Path, tiny_model_dir: Path):
    """A celery config under ``tmp_path`` (folder broker), its resources and a Dagster instance."""
    config_path = write_config(tmp_path / "celery", "celery")
    home = tmp_path / "dagster_home"
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        yield config_path, resources(tmp_path / "celery", models_dir), instance


def worker_steps(log_dir: Path) -> dict[str, str]:
    """Each worker's log by its name (partition-0, partition-1, report-writer): the Dagster events of the
    steps it executed."""
    return {path.stem: path.read_text() for path in log_dir.glob("*.log")}


def workers_that_ran(logs: dict[str, str], run_id: str, step: str) -> list[str]:
    return sorted(name for name, text in logs.items()
                  if any(run_id in line and f" - {step} - STEP_START - " in line for line in text.splitlines()))


def test_partitions_run_concurrently_on_two_workers_and_the_report_equals_in_process(celery_bench, models_dir,
                                                                                      tmp_path):
    config_path, bench_resources, instance = celery_bench
    plan = plan_bench(run_id="celery-run", config=load_config(config_path))
    logs = tmp_path / "worker_logs"
    outcomes = run_bench_distributed(plan, config_path, instance, bench_resources, log_dir=logs, quiet=False)
    assert [(o.partition_key, o.success) for o in outcomes] == [("rows", True), ("1|tiny-qwen2-vl", True),
                                                               ("2|tiny-qwen2-vl", True)], [o.error for o in outcomes]
    app = celery_app(load_config(config_path).executor)
    assert (app.config_source["worker_prefetch_multiplier"], app.config_source["task_acks_late"]) == (1, True)
    command = worker_command("partition-0", PARTITION_QUEUE)
    assert command[command.index("--concurrency") + 1] == "1"
    runs = {o.partition_key: o.run_id for o in outcomes[1:]}
    starts = {key: step_events(instance, run, "generations", dg.DagsterEventType.STEP_START)[0]
              for key, run in runs.items()}
    first, second = runs
    assert starts[first].dagster_event.pid != starts[second].dagster_event.pid  # two worker processes
    by_worker = worker_steps(logs)
    generation_workers = {key: workers_that_ran(by_worker, run, "generations") for key, run in runs.items()}
    assert sorted(generation_workers.values()) == [["partition-0"], ["partition-1"]], generation_workers
    for run in runs.values():  # the steps that open DuckDB ran in the report writer only
        assert workers_that_ran(by_worker, run, "benchmark_report") == ["report-writer"]

    in_process = tmp_path / "in_process"
    local_config = write_config(in_process, "default")
    local_defs = build_definitions(local_config, resources_of(local_config, resources(in_process, models_dir)))
    local_plan = plan_bench(run_id="celery-run", config=load_config(local_config))
    with dg.instance_for_test() as local_instance:
        assert all(r.success for r in run_bench(local_plan, local_defs, local_instance, show_progress=False))
    distributed_report = report(Path(bench_resources.database), plan.run_id)
    assert len(distributed_report["generations"]) == 2 * ROWS
    assert len(distributed_report["benchmark_summary"]) == 2
    assert distributed_report == report(in_process / "aerorl.duckdb", "celery-run")


def test_a_worker_killed_mid_partition_fails_its_run_and_the_rerun_lands_every_row_once(celery_bench):
    config_path, bench_resources, instance = celery_bench
    plan = plan_bench(batch_sizes=[1], run_id="killed-run", config=load_config(config_path))
    outcome = {}

    def launch() -> None:
        outcome["first"] = run_bench_distributed(plan, config_path, instance, bench_resources)

    cache = Path(load_config(config_path).storage.cache_url) / "generations"
    thread = threading.Thread(target=launch)
    thread.start()
    os.kill(_wait_for_generation_progress(instance, plan.run_id), signal.SIGKILL)
    thread.join(timeout=180)
    assert not thread.is_alive(), "the run hung after its worker was killed"
    rows, first = outcome["first"]
    assert rows.success and not first.success
    assert "WorkerLostError" in first.error, first.error
    with duckdb.connect(bench_resources.database, read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM generations WHERE run_id = ?", [plan.run_id]).fetchone()[0] == 0
    assert not cache.exists() or not list(cache.iterdir())  # the killed step left no Parquet, whole or partial

    rerun = run_bench_distributed(plan, config_path, instance, bench_resources, refresh_rows=False)
    assert [o.success for o in rerun] == [True], [o.error for o in rerun]
    with duckdb.connect(bench_resources.database, read_only=True) as conn:
        rows = conn.execute("SELECT count(*), count(DISTINCT sample_id), min(dagster_run_id), max(dagster_run_id) "
                            "FROM generations WHERE run_id = ?", [plan.run_id]).fetchone()
        summary = conn.execute("SELECT samples FROM benchmark_summary WHERE run_id = ?", [plan.run_id]).fetchall()
    assert rows == (ROWS, ROWS, rerun[0].run_id, rerun[0].run_id)
    assert summary == [(ROWS,)]


def _wait_for_generation_progress(instance: dg.DagsterInstance, run_tag: str, timeout_s: float = 180.0) -> int:
    """The pid of the worker process running the tagged run's generation step, once it has generated a batch."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for record in instance.get_run_records(dg.RunsFilter(tags={BENCHMARK_RUN_TAG: run_tag})):
            run_id = record.dagster_run.run_id
            started = step_events(instance, run_id, "generations", dg.DagsterEventType.STEP_START)
            progressed = [entry for entry in instance.all_logs(run_id)
                          if entry.step_key == "generations" and entry.user_message.startswith("generated ")]
            if started and progressed:
                return started[0].dagster_event.pid
        time.sleep(0.2)
    raise AssertionError(f"no generation progress of run {run_tag} within {timeout_s} s")


def test_a_worker_that_dies_while_starting_is_named_with_its_log(tmp_path):
    app = celery_app(load_config(write_config(tmp_path / "celery", "celery")).executor)
    prepare_folders(app)
    dead = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    dead.wait()
    with pytest.raises(RuntimeError, match=rf"^Celery worker partition-0 exited with 3 while starting: see "
                                           rf"{tmp_path / 'logs' / 'partition-0.log'}$"):
        wait_until_ready(app, ["partition-0"], [dead], tmp_path / "logs")
