"""Reliability: a partition that crashes part-way leaves nothing half-written, and a rerun completes it.

* (a) an exception in the second generation batch: no rows of that partition in DuckDB, no Parquet
  cache file for it (the IO manager writes atomically; a failed write leaves no temporary file and
  keeps the previous cache), and a rerun lands the full row count;
* (b) a process SIGKILLed mid-generation, or after the report's deletes and inserts but before its
  ``COMMIT``: DuckDB holds no rows of a new partition, and the previous rows of a rerun partition
  untouched; a rerun in-process completes it;
* (c) rerunning a completed partition replaces its rows and never duplicates them.
"""

from __future__ import annotations

import signal
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from transformers import Qwen2VLForConditionalGeneration

from assets.io_managers import ParquetTableIOManager

RUN = "crash-run"
FULL = {"generations": 8, "reward_scores": 8, "benchmark_summary": 4}  # conftest's 2 rows of each of 4 datasets
EMPTY = dict.fromkeys(FULL, 0)


def cache_files(bench, asset: str = "generations") -> list[Path]:
    folder = bench.cache_dir / asset
    return sorted(folder.iterdir()) if folder.exists() else []


def stored_generations(bench, batch_size: int) -> list[tuple]:
    return bench.query("SELECT sample_id, response, dagster_run_id FROM generations WHERE run_id = ? "
                       "AND batch_size = ? ORDER BY sample_id", [RUN, batch_size])


def runs_rows(bench) -> int:
    return bench.query("SELECT count(*) FROM runs WHERE run_id = ?", [RUN])[0][0]


def test_exception_mid_generation_leaves_nothing_and_reruns_complete_without_duplicates(bench, monkeypatch):
    bench.materialize_rows(RUN)
    bench.run_partition(4, RUN)  # a completed neighbour partition of the same run
    neighbour = stored_generations(bench, 4)
    original = Qwen2VLForConditionalGeneration.generate
    batches: list[int] = []

    def crash_in_second_batch(model, *args, **kwargs):
        batches.append(kwargs["input_ids"].shape[0])
        if len(batches) == 2:
            raise RuntimeError("injected crash in generation batch 2")
        return original(model, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(Qwen2VLForConditionalGeneration, "generate", crash_in_second_batch)
        crashed = bench.run_partition(1, RUN, raise_on_error=False)

    assert not crashed.success and batches == [1, 1]
    (failure,) = [event for event in crashed.all_events if event.is_step_failure]
    assert failure.step_key == "generations"
    assert "injected crash in generation batch 2" in failure.step_failure_data.error.to_string()
    assert bench.partition_counts(RUN, 1) == EMPTY
    assert [path.name for path in cache_files(bench)] == ["4__tiny-qwen2-vl.parquet"]  # only the neighbour's
    assert stored_generations(bench, 4) == neighbour

    rerun = bench.run_partition(1, RUN)
    assert bench.partition_counts(RUN, 1) == FULL
    assert {row[2] for row in stored_generations(bench, 1)} == {rerun.run_id}

    again = bench.run_partition(1, RUN)  # (c) a rerun of a completed partition replaces it
    assert bench.partition_counts(RUN, 1) == FULL
    assert {row[2] for row in stored_generations(bench, 1)} == {again.run_id}
    assert bench.query("SELECT count(*) FROM generations")[0][0] == 16  # two partitions (1 and 4) of 8 rows
    assert runs_rows(bench) == 1
    assert stored_generations(bench, 4) == neighbour


def test_failed_cache_write_keeps_the_previous_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    manager = ParquetTableIOManager(base_dir=str(tmp_path / "cache"))
    context = dg.build_output_context(asset_key=dg.AssetKey("generations"), partition_key="4|tiny-qwen2-vl")
    manager.handle_output(context, pa.table({"sample_id": ["old-1", "old-2"]}))
    (path,) = (tmp_path / "cache" / "generations").iterdir()
    previous = path.read_bytes()

    def write_half_then_fail(table, where, **kwargs):
        Path(where).write_bytes(b"PAR1 half a file")
        raise OSError("No space left on device")

    monkeypatch.setattr("assets.io_managers.pq.write_table", write_half_then_fail)
    with pytest.raises(OSError, match="No space left"):
        manager.handle_output(context, pa.table({"sample_id": ["new-1", "new-2", "new-3"]}))
    fresh = dg.build_output_context(asset_key=dg.AssetKey("generations"), partition_key="8|tiny-qwen2-vl")
    with pytest.raises(OSError, match="No space left"):
        manager.handle_output(fresh, pa.table({"sample_id": ["new-1"]}))

    assert list((tmp_path / "cache" / "generations").iterdir()) == [path]
    assert path.read_bytes() == previous
    assert pq.read_table(path).column("sample_id").to_pylist() == ["old-1", "old-2"]


def kill(process) -> None:
    process.popen.send_signal(signal.SIGKILL)
    assert process.popen.wait(timeout=30) == -signal.SIGKILL


@pytest.mark.slow
def test_killed_processes_leave_no_partial_rows_and_reruns_complete(bench_factory, launch_partition, tmp_path):
    """Two partitions killed at once, each in its own environment (one start-up wait for both):
    ``fresh`` mid-generation (its second ``generate`` call), ``rerun`` after its report's deletes and
    inserts ran but before ``COMMIT``, on top of a first complete run of the same partition."""
    fresh, rerun = bench_factory(tmp_path / "fresh"), bench_factory(tmp_path / "rerun")
    for env in (fresh, rerun):
        env.materialize_rows(RUN)
    first = rerun.run_partition(4, RUN)
    before = stored_generations(rerun, 4)
    assert {row[2] for row in before} == {first.run_id}
    in_generate, before_commit = tmp_path / "blocked-in-generate", tmp_path / "blocked-before-commit"
    mid_generation = launch_partition(fresh.env.root, 1, RUN, "--hang", "generate", "--signal-file", str(in_generate))
    mid_commit = launch_partition(rerun.env.root, 4, RUN, "--hang", "commit", "--signal-file", str(before_commit))
    mid_generation.wait_for_file(in_generate)
    mid_commit.wait_for_file(before_commit)
    kill(mid_generation)
    kill(mid_commit)

    assert fresh.partition_counts(RUN, 1) == EMPTY
    assert runs_rows(fresh) == 0
    assert cache_files(fresh) == []
    assert stored_generations(rerun, 4) == before  # the killed run's deletes and inserts never landed
    assert rerun.partition_counts(RUN, 4) == FULL
    assert runs_rows(rerun) == 1
    assert not any(path.suffix == ".tmp" for path in cache_files(rerun))

    for env, batch_size in ((fresh, 1), (rerun, 4)):
        completed = env.run_partition(batch_size, RUN)
        assert env.partition_counts(RUN, batch_size) == FULL
        assert {row[2] for row in stored_generations(env, batch_size)} == {completed.run_id}
