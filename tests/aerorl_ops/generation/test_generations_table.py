"""Generations as a flat table, and the partition stats that travel with them."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from aerorl_ops.generation.batched import GeneratedSample
from aerorl_ops.generation.generations_table import GENERATION_SCHEMA, generations_table
from aerorl_ops.generation.partition_run import PartitionStats, partition_stats, with_partition_stats
from aerorl_ops.rows import TaskItem
from aerorl_ops.telemetry import TelemetrySample, summarize


def row(sample_id: str, answers: tuple[str, ...], evidence: tuple[str, ...] = ()) -> TaskItem:
    return TaskItem(item_id=sample_id, dataset="chartqa", split="validation", source="test", question="Q?",
                    answers=answers, images=(sample_id.encode(),), evidence_entities=evidence)


def sample(sample_id: str, response: str) -> GeneratedSample:
    return GeneratedSample(sample_id=sample_id, prompt="Q?\nAnswer...", response=response,
                           raw_response=response + "<|im_end|>", generated_tokens=3, prompt_text_tokens=20,
                           vision_tokens=117, image_count=1, latency_ms=12.5, batch_latency_ms=30.0, batch_index=1,
                           batch_size=2)


ROWS = [row("a", ("12%", "12"), ("12%", "2020")), row("b", ("Alpha",))]
SAMPLES = [sample("b", "no json"), sample("a", '{"answer": "0.12"}')]


def test_table_joins_rows_to_samples_in_sample_order():
    table = generations_table(ROWS, SAMPLES)
    assert table.schema == GENERATION_SCHEMA
    records = table.to_pylist()
    assert [r["sample_id"] for r in records] == ["b", "a"]
    assert records[1]["reference"] == ["12%", "12"]
    assert records[1]["evidence_entities"] == ["12%", "2020"]
    assert records[0]["evidence_entities"] == ["Alpha"]  # no evidence recorded: the answers stand in
    assert (records[1]["claimed_entities"], records[0]["claimed_entities"]) == (["0.12"], [])


def test_samples_of_unknown_rows_are_refused():
    with pytest.raises(ValueError, match="'zzz'"):
        generations_table(ROWS, [sample("zzz", "x")])


@pytest.mark.parametrize("telemetry", [
    summarize([TelemetrySample(0.1, rss_mb=512.0, cpu_pct=80.0, gpus=())], duration_s=0.1, interval_s=0.1),
    None,
])
def test_partition_stats_survive_a_parquet_round_trip(tmp_path: Path, telemetry):
    stats = PartitionStats(model_source="/m", device="cpu", batch_size=2, samples=2, wall_s=1.5,
                           model_load_s=0.25, telemetry=telemetry, generation={"max_new_tokens": 4, "seed": 0})
    table = with_partition_stats(generations_table(ROWS, SAMPLES), stats)
    pq.write_table(table, tmp_path / "g.parquet")
    assert partition_stats(pq.read_table(tmp_path / "g.parquet")) == stats
    with pytest.raises(ValueError, match="no partition stats"):
        partition_stats(generations_table(ROWS, SAMPLES))
