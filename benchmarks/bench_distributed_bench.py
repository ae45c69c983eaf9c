"""Wall time of the default benchmark on Celery with 2 partition workers vs in-process, same config.

The shipped ``config/benchmark.toml`` (every model x batch-size partition, every dataset) runs twice
under a temporary folder, each with its own Dagster instance, Parquet cache and DuckDB file:

* in-process: ``aerorl bench``'s default path, one partition after another in this process;
* celery: ``[executor] kind = "celery"`` with the folder broker, ``workers`` partition workers and the
  report writer started here, partition runs launched ``workers`` at a time.

Both include the rows (in-process either way). The two reports are compared (every report table's
rows, ``aerorl_ops.storage.behaviour_rows``: measured columns left out) and must be equal. On a 2-core
machine the Celery run pays for its worker and launcher processes (each imports torch and loads the
model per step) and cannot run two partitions faster than one core each: expect overhead, not
speed-up.

    python benchmarks/bench_distributed_bench.py [--workers 2] [--torch-threads 1]
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT_TABLES = ("generations", "reward_scores", "benchmark_summary", "rejected_rows")


def variant(folder: Path, kind: str, workers: int) -> Path:
    """The shipped config with its own executor and Parquet cache under ``folder``; the latency budget is
    made unreachable so the cost reward (and the compared scores) depend on no timing."""
    text = (ROOT / "config" / "benchmark.toml").read_text()
    text = re.sub(r"(?ms)^\[executor\].*?(?=^\[|\Z)", f'[executor]\nkind = "{kind}"\ncelery_dir = "{folder}/celery"\n'
                  f"workers = {workers}\n\n", text)
    text = re.sub(r"(?ms)^\[storage\].*?(?=^\[|\Z)", f'[storage]\ncache_url = "{folder}/cache"\n\n', text)
    text = re.sub(r"(?m)^latency_budget_ms = .*$", "latency_budget_ms = 1e9", text)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bench.toml").write_text(text)
    return folder / "bench.toml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--torch-threads", type=int, default=1, help="torch threads of every partition process")
    parser.add_argument("--models-dir", type=Path, default=ROOT / "data" / "models")
    args = parser.parse_args()

    import dagster as dg

    from aerorl_ops.storage.behaviour_rows import behaviour_rows
    from aerorl_pipeline.bench import plan_bench, run_bench, run_bench_distributed
    from aerorl_pipeline.definitions import build_definitions
    from aerorl_pipeline.distributed_bench import BenchResources, resources_of
    from assets.project import load_config

    with tempfile.TemporaryDirectory(prefix="bench-distributed-") as scratch:
        timings, reports = {}, {}
        for kind in ("default", "celery"):
            folder = Path(scratch) / kind
            config = variant(folder, kind, args.workers)
            resources = BenchResources(database=str(folder / "aerorl.duckdb"), models_dir=str(args.models_dir),
                                       device="cpu", torch_threads=args.torch_threads)
            plan = plan_bench(run_id="bench-distributed", config=load_config(config))
            (folder / "home").mkdir()
            with dg.instance_for_test(temp_dir=str(folder / "home")) as instance:
                started = time.perf_counter()
                if kind == "default":
                    defs = build_definitions(config, resources_of(config, resources))
                    results = run_bench(plan, defs, instance, show_progress=False)
                else:
                    results = run_bench_distributed(plan, config, instance, resources)
                timings[kind] = time.perf_counter() - started
            failed = [getattr(r, "run_id", "") for r in results if not r.success]
            if failed:
                print(f"{kind}: runs failed: {failed}")
                return 1
            reports[kind] = behaviour_rows(str(folder / "aerorl.duckdb"), plan.run_id, REPORT_TABLES)
            print(f"{kind:>8}: {len(plan.partition_keys)} partitions, "
                  f"{len(reports[kind]['generations'])} generations, {timings[kind]:.1f} s wall")
    same = reports["default"] == reports["celery"]
    print(f"celery ({args.workers} workers) / in-process wall time: {timings['celery'] / timings['default']:.2f}x; "
          f"reports equal: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
