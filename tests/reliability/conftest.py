"""Helpers for the reliability tests: the real benchmark definitions against isolated resources.

* ``bench`` / ``bench_factory`` wrap one ``DagsterTestEnv`` (DuckDB file, Parquet cache and
  ephemeral instance under tmp; the session's tiny model): materialize the rows, run one partition
  of the ``benchmark`` job in-process, read what landed in DuckDB;
* ``launch_partition`` runs one partition in a process of its own (``partition_driver.py``) against
  the same folder, for tests that kill it or run several at once;
* ``docvqa_file`` writes a small Parquet shard in the lmms-lab/DocVQA schema.

Inputs stay tiny: 2 + 2 rows, 3 new tokens.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import dagster as dg
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

DRIVER = Path(__file__).with_name("partition_driver.py")

ROW_LIMIT = 2  # per dataset, so 8 rows in all (docvqa, chartqa, easy_vqa, arc)
MAX_NEW_TOKENS = 3
MODEL_KEY = "tiny-qwen2-vl"
PARTITION_TABLES = ("generations", "reward_scores", "benchmark_summary")
IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
DOCVQA_SCHEMA = pa.schema([  # lmms-lab/DocVQA, config DocVQA, as stored on the hub
    ("questionId", pa.string()), ("question", pa.string()), ("question_types", pa.list_(pa.string())),
    ("image", IMAGE_TYPE), ("docId", pa.int64()), ("ucsf_document_id", pa.string()),
    ("ucsf_document_page_no", pa.string()), ("answers", pa.list_(pa.string())), ("data_split", pa.string()),
])


def partition_key(batch_size: int, model_key: str = MODEL_KEY) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"model": model_key, "batch_size": str(batch_size)})


ROWS_ASSETS = ("docvqa_rows", "chartqa_rows", "easy_vqa_rows", "arc_rows")
"""The shipped config's rows assets."""


def rows_run_config(limit: int = ROW_LIMIT) -> dict:
    return {"ops": {name: {"config": {"limit": limit}} for name in ROWS_ASSETS}}


def partition_run_config(max_new_tokens: int = MAX_NEW_TOKENS) -> dict:
    return {"ops": {"generations": {"config": {"max_new_tokens": max_new_tokens}}}}


class Bench:
    """One isolated environment and the few things the reliability tests do with it."""

    def __init__(self, env) -> None:
        from aerorl_pipeline.definitions import build_definitions

        self.env = env
        self.defs = build_definitions(resources=env.resources)

    @property
    def duckdb_path(self) -> Path:
        return self.env.duckdb_path

    @property
    def cache_dir(self) -> Path:
        return self.env.cache_dir

    def materialize_rows(self, run_tag: str, limit: int = ROW_LIMIT) -> dg.ExecuteInProcessResult:
        from assets.runs import BENCHMARK_RUN_TAG

        rows = [self.defs.get_assets_def(name) for name in ROWS_ASSETS]
        return dg.materialize(rows, resources=self.env.resources, instance=self.env.instance,
                              tags={BENCHMARK_RUN_TAG: run_tag}, run_config=rows_run_config(limit))

    def run_partition(self, batch_size: int, run_tag: str, raise_on_error: bool = True,
                      max_new_tokens: int = MAX_NEW_TOKENS) -> dg.ExecuteInProcessResult:
        """The real ``benchmark`` job for one partition; the rows must be materialized first."""
        from assets.runs import BENCHMARK_RUN_TAG

        job = self.defs.resolve_job_def("benchmark")
        return job.execute_in_process(partition_key=partition_key(batch_size), instance=self.env.instance,
                                      tags={BENCHMARK_RUN_TAG: run_tag}, raise_on_error=raise_on_error,
                                      run_config=partition_run_config(max_new_tokens))

    def query(self, sql: str, params: list | tuple = ()) -> list[tuple]:
        with duckdb.connect(str(self.duckdb_path), read_only=True) as conn:
            return conn.execute(sql, list(params)).fetchall()

    def partition_rows(self, table: str, run_id: str, batch_size: int) -> int:
        """Rows of ``table`` for (run_id, tiny model, batch_size); 0 when the table does not exist yet."""
        if not self.duckdb_path.exists() or not self.query(
                "SELECT 1 FROM information_schema.tables WHERE table_name = ?", [table]):
            return 0
        return self.query(f"SELECT count(*) FROM {table} WHERE run_id = ? AND model_key = ? AND batch_size = ?",
                          [run_id, MODEL_KEY, batch_size])[0][0]

    def partition_counts(self, run_id: str, batch_size: int) -> dict[str, int]:
        return {table: self.partition_rows(table, run_id, batch_size) for table in PARTITION_TABLES}


@pytest.fixture
def bench_factory(dagster_env_factory) -> Iterator[Callable[[Path], Bench]]:
    """Makes a :class:`Bench` rooted at a given folder; instances are disposed after the test."""
    made: list[Bench] = []

    def make(root: Path) -> Bench:
        made.append(Bench(dagster_env_factory(root)))
        return made[-1]

    yield make
    for bench in made:
        bench.env.instance.dispose()


@pytest.fixture
def bench_on_store(tmp_path: Path, dagster_env_factory) -> Iterator[Callable[[object], Bench]]:
    """Makes a :class:`Bench` whose Parquet cache is the given IO manager (an S3 one, say)."""
    made: list[Bench] = []

    def make(io_manager) -> Bench:
        env = dagster_env_factory(tmp_path / f"env-{len(made)}")
        made.append(Bench(env._replace(resources={**env.resources, "io_manager": io_manager})))
        return made[-1]

    yield make
    for bench in made:
        bench.env.instance.dispose()


@pytest.fixture
def bench(tmp_path: Path, bench_factory) -> Bench:
    return bench_factory(tmp_path / "env")


def png(shade: int = 200) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 6), (shade, shade, shade)).save(buffer, format="PNG")
    return buffer.getvalue()


def write_docvqa_file(path: Path, records: Sequence[tuple[str, list[str], bytes]]) -> Path:
    """A Parquet shard in the lmms-lab/DocVQA schema; one ``(questionId, answers, image bytes)`` per record."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"questionId": question_id, "question": f"What is field {index}?", "question_types": ["form"],
             "image": {"bytes": image, "path": f"{index}.png"}, "docId": 7, "ucsf_document_id": "abc123",
             "ucsf_document_page_no": "1", "answers": answers, "data_split": "val"}
            for index, (question_id, answers, image) in enumerate(records)]
    pq.write_table(pa.Table.from_pylist(rows, schema=DOCVQA_SCHEMA), path)
    return path


@pytest.fixture
def docvqa_file() -> Callable[[Path, Sequence[tuple[str, list[str], bytes]]], Path]:
    return write_docvqa_file


@pytest.fixture
def png_bytes() -> Callable[..., bytes]:
    return png


class PartitionProcess:
    """``partition_driver.py`` running one partition in a process of its own; output goes to files."""

    def __init__(self, args: list[str], logs: Path) -> None:
        self.stdout_path, self.stderr_path = logs.with_suffix(".out"), logs.with_suffix(".err")
        with open(self.stdout_path, "w") as out, open(self.stderr_path, "w") as err:
            self.popen = subprocess.Popen([sys.executable, str(DRIVER), *args], stdout=out, stderr=err)

    def log_tail(self) -> str:
        return self.stderr_path.read_text()[-4000:]

    def wait_for_file(self, path: Path, timeout_s: float = 120) -> None:
        """Until ``path`` exists; fails with the process's log when it exits or time runs out first."""
        deadline = time.monotonic() + timeout_s
        while not path.exists():
            if self.popen.poll() is not None:
                raise AssertionError(f"driver exited ({self.popen.returncode}) before {path.name}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {path.name} after {timeout_s} s:\n{self.log_tail()}")
            time.sleep(0.1)

    def result(self, timeout_s: float = 180) -> dict:
        """The driver's JSON line (``run_id``, ``success``) once it has exited."""
        returncode = self.popen.wait(timeout=timeout_s)
        lines = self.stdout_path.read_text().strip().splitlines()
        assert returncode == 0 and lines, f"driver exited {returncode}:\n{self.log_tail()}"
        return json.loads(lines[-1])


@pytest.fixture
def launch_partition(tmp_path: Path, models_dir: Path,
                     tiny_model_dir: Path) -> Iterator[Callable[..., PartitionProcess]]:
    """Start ``partition_driver.py`` for one partition against resources under ``root``; killed after the test."""
    started: list[PartitionProcess] = []

    def launch(root: Path, batch_size: int, run_tag: str, *options: str) -> PartitionProcess:
        args = ["--root", str(root), "--models-dir", str(models_dir), "--batch-size", str(batch_size),
                "--run-tag", run_tag, *options]
        started.append(PartitionProcess(args, tmp_path / f"driver-{len(started)}"))
        return started[-1]

    yield launch
    for process in started:
        if process.popen.poll() is None:
            process.popen.kill()
            process.popen.wait()
