"""Reliability: impossible measurements in generations and bad dataset records are rejected, never lost.

* ``split_valid_generations`` rejects NaN, infinite, negative or missing latencies and negative or
  missing token counts, each with its reason; the rest pass through unchanged (partition stats
  included), and rows in = accepted + rejected, also once the rejections are in DuckDB.
* The real ``docvqa_rows`` asset, pointed at a small lmms-lab/DocVQA Parquet file holding a corrupt
  image and an empty answers list: its metadata counts and the ``rejected_rows`` table add up.
"""

from __future__ import annotations

from dataclasses import replace

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster_duckdb import DuckDBResource

from aerorl_ops.generation.batched import GeneratedSample
from aerorl_ops.generation.generations_table import generations_table
from aerorl_ops.generation.partition_run import PartitionStats, partition_stats, with_partition_stats
from aerorl_ops.generation.validation import split_valid_generations
from aerorl_ops.rows import RejectedRow
from aerorl_pipeline.definitions import build_definitions
from assets.rejections import record_rejections
from assets.runs import BENCHMARK_RUN_TAG

docvqa_rows = build_definitions().get_assets_def("docvqa_rows")

STATS = PartitionStats(model_source="/models/tiny", device="cpu", batch_size=2, samples=5, wall_s=1.5,
                       model_load_s=0.2, telemetry=None, generation={"max_new_tokens": 3})


def sample(row, **overrides) -> GeneratedSample:
    values = dict(sample_id=row.item_id, prompt=row.question, response='{"answer": "x"}', raw_response="",
                  generated_tokens=3, prompt_text_tokens=12, vision_tokens=16, image_count=1, latency_ms=40.0,
                  batch_latency_ms=80.0, batch_index=0, batch_size=2)
    return GeneratedSample(**{**values, **overrides})


@pytest.fixture
def generations(few_rows) -> pa.Table:
    """Five generations: rows 0 and 4 are sound, 1-3 carry impossible measurements."""
    samples = [
        sample(few_rows[0]),
        sample(few_rows[1], latency_ms=float("nan")),
        sample(few_rows[2], latency_ms=-3.5),
        sample(few_rows[3], generated_tokens=-1, batch_latency_ms=float("inf")),
        sample(few_rows[4], latency_ms=0.0, generated_tokens=0),  # zero is a measurement, not an error
    ]
    return with_partition_stats(generations_table(few_rows, samples), STATS)


def test_impossible_measurements_are_rejected_with_their_reasons(generations, few_rows):
    accepted, rejected = split_valid_generations(generations)

    ids = [row.item_id for row in few_rows]
    assert accepted.column("sample_id").to_pylist() == [ids[0], ids[4]]
    assert rejected == [
        RejectedRow("generations", ids[1], ids[1], "latency_ms is NaN"),
        RejectedRow("generations", ids[2], ids[2], "latency_ms is negative (-3.5)"),
        RejectedRow("generations", ids[3], ids[3],
                    "batch_latency_ms is infinite (inf); generated_tokens is negative (-1)"),
    ]
    assert accepted.num_rows + len(rejected) == generations.num_rows


def test_accepted_rows_are_unchanged_and_keep_the_partition_stats(generations):
    accepted, _ = split_valid_generations(generations)

    assert accepted.schema == generations.schema
    assert partition_stats(accepted) == STATS
    originals = {r["sample_id"]: r for r in generations.to_pylist()}
    assert all(record == originals[record["sample_id"]] for record in accepted.to_pylist())


def test_a_clean_table_passes_whole(few_rows):
    table = generations_table(few_rows, [sample(row) for row in few_rows])
    accepted, rejected = split_valid_generations(table)
    assert rejected == []
    assert accepted.equals(table)


def test_missing_values_and_a_missing_sample_id_are_rejected(generations):
    records = generations.to_pylist()
    records[0] = {**records[0], "latency_ms": None, "vision_tokens": None}
    records[4] = {**records[4], "sample_id": None, "prompt_text_tokens": -7}
    table = pa.Table.from_pylist(records, schema=generations.schema)

    accepted, rejected = split_valid_generations(table)

    assert accepted.num_rows == 0
    by_locator = {r.locator: r for r in rejected}
    assert by_locator[records[0]["sample_id"]].reason == "latency_ms is missing; vision_tokens is missing"
    assert by_locator["generations#row=4"] == RejectedRow(
        "generations", "generations#row=4", None, "missing sample id; prompt_text_tokens is negative (-7)")
    assert len(rejected) == table.num_rows


def test_a_table_without_the_measured_columns_is_an_error_not_a_rejection(generations):
    with pytest.raises(ValueError, match=r"lacks columns \['latency_ms'\]"):
        split_valid_generations(generations.drop_columns(["latency_ms"]))


def test_rejections_land_in_duckdb_and_add_up(generations, tmp_path):
    database = DuckDBResource(database=str(tmp_path / "report.duckdb"))
    accepted, rejected = split_valid_generations(generations)

    record_rejections(database, "run-1", "generations", "docvqa", rejected)
    record_rejections(database, "run-1", "generations", "docvqa", rejected)  # a rerun replaces, never adds

    with database.get_connection() as conn:
        stored = conn.execute("SELECT stage, locator, sample_id, reason FROM rejected_rows WHERE run_id = 'run-1' "
                              "ORDER BY locator").fetchall()
    assert stored == sorted(("generations", r.locator, r.sample_id, r.reason) for r in rejected)
    assert accepted.num_rows + len(stored) == generations.num_rows


# --- the docvqa_rows asset over an lmms-lab/DocVQA file -------------------------------------------------

def test_docvqa_rows_asset_counts_and_rejected_rows_add_up(bench, tmp_path, docvqa_file, png_bytes):
    records = [
        ("11", ["May 1"], png_bytes()),
        ("12", ["42"], b"\x89PNG\r\n\x1a\n not really a png"),
        ("13", [], png_bytes()),
        ("14", ["Acme", "ACME Corp"], png_bytes()),
    ]
    path = docvqa_file(tmp_path / "validation-00000-of-00001.parquet", records)
    run_config = {"ops": {"docvqa_rows": {"config": {"files": [str(path)], "split": "validation"}}}}

    for _ in range(2):  # the second run must replace the first run's rejections, not add to them
        result = dg.materialize([docvqa_rows], resources=bench.env.resources, instance=bench.env.instance,
                                tags={BENCHMARK_RUN_TAG: "rows-run"}, run_config=run_config)

    (materialization,) = result.asset_materializations_for_node("docvqa_rows")
    metadata = {key: value.value for key, value in materialization.metadata.items()}
    cached = pq.read_table(bench.cache_dir / "docvqa_rows" / "all.parquet")
    stored = bench.query("SELECT dataset, locator, sample_id, reason FROM rejected_rows "
                         "WHERE run_id = 'rows-run' AND stage = 'docvqa_rows' ORDER BY locator")

    assert cached.column("sample_id").to_pylist() == ["docvqa-11", "docvqa-14"]
    assert [(sample_id, reason.split(":")[0]) for _, _, sample_id, reason in stored] == [
        ("docvqa-12", "corrupt image"), ("docvqa-13", "no answers")]
    assert [locator for _, locator, _, _ in stored] == [f"{path}#row=1", f"{path}#row=2"]
    assert (metadata["rows_read"], metadata["dagster/row_count"], metadata["rows_rejected"]) == (4, 2, 2)
    assert metadata["rows_read"] == len(records) == cached.num_rows + len(stored)


def test_replace_keeps_rejections_of_other_stages(tmp_path):
    """Rejections are keyed by (run, stage, dataset): one stage's rerun never clears another's."""
    database = DuckDBResource(database=str(tmp_path / "report.duckdb"))
    bad = RejectedRow("f.parquet", "f.parquet#row=3", "docvqa-3", "no answers")
    record_rejections(database, "run-1", "docvqa_rows", "docvqa", [bad])
    record_rejections(database, "run-1", "generations", "docvqa", [replace(bad, source="generations")])
    record_rejections(database, "run-1", "generations", "docvqa", [])
    with database.get_connection() as conn:
        assert conn.execute("SELECT stage, sample_id FROM rejected_rows").fetchall() == [("docvqa_rows", "docvqa-3")]
