"""Run one partition of the real ``benchmark`` job in a process of its own (used by the reliability tests).

Resources live under ``--root`` exactly as ``tests/conftest.py::make_dagster_env`` lays them out
(``aerorl.duckdb``, ``cache/``), so a test can materialize the rows in-process, run a partition
here, kill this process, and read what is left. The dataset rows must already be in the cache.

    python tests/reliability/partition_driver.py --root R --models-dir M --batch-size 4 --run-tag T \
        [--dagster-home H] [--executor in_process|multiprocess] [--hang generate|commit --signal-file F]

``--hang generate`` lets the first ``generate`` call through and blocks the second one (mid-partition);
``--hang commit`` blocks the report's DuckDB ``COMMIT`` after its deletes and inserts ran. Either way
the signal file is written once the process is blocked, so the test knows when to kill it.
Prints one JSON line ``{"run_id": ..., "success": ...}`` when the run ends.
"""

from __future__ import annotations

import argparse
import json
import time
from contextlib import contextmanager
from pathlib import Path

import dagster as dg

HANG_S = 300.0
MAX_NEW_TOKENS = 3


def benchmark_job_for(root: str, models_dir: str) -> dg.JobDefinition:
    """The real ``benchmark`` job with the test resources under ``root``."""
    from dagster_duckdb import DuckDBResource

    from aerorl_pipeline.definitions import build_definitions
    from assets.io_managers import ParquetTableIOManager
    from assets.resources import ModelRuntime

    resources = {
        "model_runtime": ModelRuntime(models_dir=models_dir, device="cpu", torch_threads=1,
                                      telemetry_interval_s=0.05),
        "duckdb": DuckDBResource(database=str(Path(root) / "aerorl.duckdb")),
        "io_manager": ParquetTableIOManager(base_dir=str(Path(root) / "cache")),
    }
    return build_definitions(resources=resources).resolve_job_def("benchmark")


def block(signal_file: Path) -> None:
    signal_file.write_text("blocked")
    time.sleep(HANG_S)


def hang_in_second_generate(signal_file: Path) -> None:
    from transformers import Qwen2VLForConditionalGeneration

    original = Qwen2VLForConditionalGeneration.generate
    calls = []

    def generate(model, *args, **kwargs):
        calls.append(1)
        if len(calls) > 1:
            block(signal_file)
        return original(model, *args, **kwargs)

    Qwen2VLForConditionalGeneration.generate = generate


class _HoldCommit:
    """A DuckDB connection whose ``COMMIT`` blocks: every statement before it has run."""

    def __init__(self, conn, signal_file: Path) -> None:
        self._conn = conn
        self._signal_file = signal_file

    def execute(self, sql: str, *args):
        if sql.strip().upper() == "COMMIT":
            block(self._signal_file)
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str):
        return getattr(self._conn, name)


def hang_before_commit(signal_file: Path) -> None:
    from dagster_duckdb import DuckDBResource

    original = DuckDBResource.get_connection

    @contextmanager
    def get_connection(resource):
        with original(resource) as conn:
            yield _HoldCommit(conn, signal_file)

    DuckDBResource.get_connection = get_connection


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--models-dir", required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--run-tag", required=True)
    parser.add_argument("--dagster-home", help="a persistent instance; default: an ephemeral one")
    parser.add_argument("--executor", choices=["in_process", "multiprocess"], default="in_process")
    parser.add_argument("--hang", choices=["generate", "commit"])
    parser.add_argument("--signal-file", type=Path)
    args = parser.parse_args()

    from assets.benchmark.partitions import BATCH_DIMENSION, MODEL_DIMENSION
    from assets.runs import BENCHMARK_RUN_TAG

    if args.hang == "generate":
        hang_in_second_generate(args.signal_file)
    elif args.hang == "commit":
        hang_before_commit(args.signal_file)

    key = dg.MultiPartitionKey({MODEL_DIMENSION: "tiny-qwen2-vl", BATCH_DIMENSION: str(args.batch_size)})
    run_config = {"ops": {"generations": {"config": {"max_new_tokens": MAX_NEW_TOKENS}}}}
    instance = (dg.DagsterInstance.from_config(args.dagster_home) if args.dagster_home
                else dg.DagsterInstance.ephemeral())
    with instance:
        if args.executor == "in_process":
            result = benchmark_job_for(args.root, args.models_dir).execute_in_process(
                partition_key=key, instance=instance, run_config=run_config, raise_on_error=False,
                tags={BENCHMARK_RUN_TAG: args.run_tag})
        else:
            here = Path(__file__).resolve()
            job = dg.build_reconstructable_job(here.stem, benchmark_job_for.__name__,
                                               reconstructable_args=(args.root, args.models_dir),
                                               reconstructor_working_directory=str(here.parent))
            tags = {BENCHMARK_RUN_TAG: args.run_tag, "dagster/partition": str(key),
                    **{f"dagster/partition/{name}": value for name, value in key.keys_by_dimension.items()}}
            preload = {"forkserver": {"preload_modules": ["aerorl_pipeline.definitions"]}}
            run_config["execution"] = {"config": {"multiprocess": {"start_method": preload}}}
            result = dg.execute_job(job, instance, run_config=run_config, tags=tags)
    print(json.dumps({"run_id": result.run_id, "success": result.success}))


if __name__ == "__main__":
    main()
