"""`aerorl bench --skip-rows` notices cached rows whose source changed: it says so in one line and refreshes
them (``--stale-ok`` keeps them); an unchanged source is read from the cache without a word."""

from __future__ import annotations

import json

import dagster as dg
import duckdb
import pytest
from PIL import Image

import aerorl_pipeline.definitions as definitions
import assets.project
from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.envs.configured import dataset_fingerprint
from aerorl_ops.rows.source_fingerprint import SourceChange, SourceFingerprint
from aerorl_pipeline import cli
from aerorl_pipeline.stale_rows import StaleRows, stale_rows
from assets.runs import BENCHMARK_RUN_TAG

CONFIG = ('[benchmark]\nbatch_sizes = [4]\n\n[datasets.shapes]\nkind = "jsonl"\npath = "shapes.jsonl"\n\n'
          '[models.tiny-qwen2-vl]\nsource = "embedded:tiny-qwen2-vl"\n')


def write_questions(path, count: int) -> None:
    lines = [{"id": f"q{index}", "question": "Colour?", "answer": "red", "image": "red.png"} for index in range(count)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_only_a_dataset_whose_recorded_source_differs_is_stale(tmp_path):
    path = tmp_path / "shapes.jsonl"
    write_questions(path, 12)
    shapes = DatasetSettings("shapes", kind="jsonl", split="test", limit=48, path=str(path))
    docvqa = DatasetSettings("docvqa", kind="docvqa", split="validation", limit=48)
    recorded = {"shapes": dataset_fingerprint(shapes), "docvqa": dataset_fingerprint(docvqa)}
    assert stale_rows([shapes, docvqa], recorded) == []
    size = path.stat().st_size
    write_questions(path, 6)
    assert stale_rows([shapes, docvqa], recorded) == [
        StaleRows(shapes, SourceChange(str(path), f"size {size} -> {path.stat().st_size} bytes"))]
    assert stale_rows([shapes], {}) == []  # nothing recorded (cached before fingerprints were): not told stale


def test_the_line_says_what_changed_and_what_happens_to_the_rows():
    stale = StaleRows(DatasetSettings("shapes", kind="jsonl", split="test", limit=4),
                      SourceChange("/d/shapes.jsonl", "size 10 -> 5 bytes"))
    assert stale.message(stale_ok=False) == (
        "aerorl: rows of dataset 'shapes' are stale: /d/shapes.jsonl changed since they were cached "
        "(size 10 -> 5 bytes); refreshing them (--stale-ok keeps the cached rows)")
    assert stale.message(stale_ok=True).endswith("(size 10 -> 5 bytes); keeping them (--stale-ok)")


@pytest.fixture
def bench_command(dagster_env, monkeypatch, capsys, tmp_path):
    """Runs ``aerorl bench --run-id RUN *flags`` on the one-dataset config in ``tmp_path``; returns its stderr,
    the samples it benchmarked and the benchmark run whose rows it read."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.setattr(definitions, "default_resources", lambda storage=None: dagster_env.resources)
    monkeypatch.setattr(assets.project, "DUCKDB_PATH", dagster_env.duckdb_path)
    (tmp_path / "bench.toml").write_text(CONFIG)
    Image.new("RGB", (8, 8), (255, 0, 0)).save(tmp_path / "red.png")

    def run(run_id: str, *flags: str) -> tuple[str, int, str]:
        assert cli.main(["bench", "--config", str(tmp_path / "bench.toml"), "--run-id", run_id, "--max-new-tokens",
                         "2", *flags]) == 0
        with duckdb.connect(str(dagster_env.duckdb_path), read_only=True) as conn:
            (samples,) = conn.execute("SELECT samples FROM benchmark_summary WHERE run_id = ?", [run_id]).fetchone()
        with dg.DagsterInstance.get() as instance:
            event = instance.get_latest_materialization_event(dg.AssetKey("shapes_rows"))
            rows_run = instance.get_run_by_id(event.run_id)
        return capsys.readouterr().err, samples, rows_run.tags[BENCHMARK_RUN_TAG]

    return run


def test_skip_rows_refreshes_the_rows_of_a_changed_file_once_and_stale_ok_keeps_them(bench_command, tmp_path):
    path = tmp_path / "shapes.jsonl"
    write_questions(path, 12)
    assert bench_command("cached")[1:] == (12, "cached")
    size = path.stat().st_size
    write_questions(path, 6)
    change = f"{path} changed since they were cached (size {size} -> {path.stat().st_size} bytes)"

    err, samples, rows_from = bench_command("kept", "--skip-rows", "--stale-ok")
    assert (samples, rows_from) == (12, "cached")
    assert err.count(f"aerorl: rows of dataset 'shapes' are stale: {change}; keeping them (--stale-ok)\n") == 1

    err, samples, rows_from = bench_command("refreshed", "--skip-rows")
    assert (samples, rows_from) == (6, "refreshed")
    line = f"aerorl: rows of dataset 'shapes' are stale: {change}; refreshing them (--stale-ok keeps the cached rows)"
    assert err.count(line) == 1 and err.count("aerorl: rows of dataset") == 1

    err, samples, rows_from = bench_command("unchanged", "--skip-rows")
    assert (samples, rows_from) == (6, "refreshed") and "stale" not in err


def test_the_rows_materialization_records_its_fingerprint_as_metadata_and_data_version(bench_command, tmp_path):
    write_questions(tmp_path / "shapes.jsonl", 3)
    bench_command("cached")
    with dg.DagsterInstance.get() as instance:
        materialization = instance.get_latest_materialization_event(dg.AssetKey("shapes_rows")).asset_materialization
    recorded = SourceFingerprint.from_dict(materialization.metadata["source_fingerprint"].value)
    assert [file.path for file in recorded.files] == [str(tmp_path / "shapes.jsonl")]
    assert materialization.tags["dagster/data_version"] == recorded.version
