"""The plain function the dataset rows assets wrap: a configured dataset's rows, with this run's overrides."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import duckdb
from dagster_duckdb import DuckDBResource
from PIL import Image

from aerorl_ops.config.datasets import DatasetSettings
from assets.datasets.rows import DatasetRowsConfig, build_dataset_rows, load_rows
from assets.runs import BENCHMARK_RUN_TAG

CHARTQA = DatasetSettings("chartqa", kind="chartqa", split="validation", limit=48)
DOCVQA = DatasetSettings("docvqa", kind="docvqa", split="validation", limit=3, seed=0)


def test_synthetic_rows_follow_limit_and_seed():
    result = load_rows(CHARTQA, DatasetRowsConfig(limit=2, seed=5, split="test"))
    assert [(r.dataset, r.split) for r in result.items] == [("chartqa", "test")] * 2
    assert not result.rejected
    default = load_rows(DOCVQA, DatasetRowsConfig())  # the table's limit, split and seed
    assert [(r.dataset, r.split) for r in default.items] == [("docvqa", "validation")] * 3
    seeded_7 = DatasetSettings("docvqa", kind="docvqa", split="validation", limit=3, seed=7)
    assert load_rows(seeded_7, DatasetRowsConfig(seed=0)).items == default.items  # a run's seed 0 is honoured
    assert load_rows(seeded_7, DatasetRowsConfig()).items != default.items  # the table's seed 7 is used


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def png(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (2, 2), (255, 0, 0)).save(path, format="PNG")
    return path


def test_a_runs_overrides_keep_the_datasets_image_roots(tmp_path):
    """An image kept in an allowed root outside the dataset's folder is read even when a run overrides the limit."""
    outside = png(tmp_path / "images" / "red.png")
    path = write_jsonl(tmp_path / "set" / "d.jsonl", [{"id": "a", "question": "Colour?", "answer": "red",
                                                      "image": str(outside)}])
    dataset = DatasetSettings("mine", kind="jsonl", split="test", limit=1, path=str(path),
                              image_roots=(str(tmp_path / "images"),))
    result = load_rows(dataset, DatasetRowsConfig(limit=5))
    assert [row.item_id for row in result.items] == ["a"] and not result.rejected


def test_a_dataset_with_no_usable_row_fails_and_still_records_every_rejection(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [{"id": "a", "question": "Colour?", "answer": "red", "image": "no.png"},
                                              {"id": "b", "question": "Colour?", "answer": "red",
                                               "image": "../../etc/passwd"}])
    dataset = DatasetSettings("broken", kind="jsonl", split="test", limit=10, path=str(path))
    database = tmp_path / "report.duckdb"
    result = dg.materialize([build_dataset_rows(dataset)], resources={"duckdb": DuckDBResource(database=str(database))},
                            raise_on_error=False, tags={BENCHMARK_RUN_TAG: "bench-x"})
    assert not result.success
    with duckdb.connect(str(database), read_only=True) as conn:
        stored = conn.execute("SELECT run_id, stage, dataset, sample_id, reason FROM rejected_rows "
                              "ORDER BY sample_id").fetchall()
    assert [row[:4] for row in stored] == [("bench-x", "broken_rows", "broken", "a"),
                                           ("bench-x", "broken_rows", "broken", "b")]
    assert stored[0][4].startswith("image file not found") and "leaves the dataset folder" in stored[1][4]
