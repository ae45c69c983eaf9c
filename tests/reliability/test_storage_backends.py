"""Reliability: the benchmark job on both storage backends, a local folder and S3 (a moto server).

One partition of the real ``benchmark`` job in which one generation carries an impossible latency:

* the partition's Parquet (generations, reward scores) lands in the configured store, as whole objects;
* rows in = rows reported + rows rejected, and the rejected one is in ``rejected_rows`` with its reason;
* an unreachable store fails the step with an error naming its URL.
"""

from __future__ import annotations

import socket

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import assets.benchmark.generation as generation_asset
from aerorl_pipeline.failures import failure_from_results
from assets.io_managers import ParquetTableIOManager

RUN = "storage-run"
BATCH_SIZE = 4
ROWS_IN = 8  # 2 rows of each of the 4 shipped datasets
CREDENTIALS = {"key": "testing", "secret": "testing"}  # the moto server accepts any


def poison_first_latency(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the partition's first generation report a negative latency (a broken clock)."""
    real = generation_asset.run_generation

    def with_a_broken_clock(*args, **kwargs) -> pa.Table:
        table = real(*args, **kwargs)
        latency = table.column("latency_ms").to_pylist()
        latency[0] = -5.0
        index = table.schema.get_field_index("latency_ms")
        return table.set_column(index, table.schema.field(index), pa.array(latency, table.schema.field(index).type))

    monkeypatch.setattr(generation_asset, "run_generation", with_a_broken_clock)


@pytest.fixture(params=["local", "s3"])
def backend(request, bench, bench_on_store):
    """A bench whose Parquet cache is a local folder or an S3 bucket, and a reader of that store."""
    if request.param == "local":
        def read(asset: str) -> pa.Table:
            return pq.read_table(bench.cache_dir / asset / f"{BATCH_SIZE}__tiny-qwen2-vl.parquet")
        return bench, read
    boto3 = pytest.importorskip("boto3")
    endpoint = request.getfixturevalue("s3_endpoint")
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id=CREDENTIALS["key"], aws_secret_access_key=CREDENTIALS["secret"])
    client.create_bucket(Bucket="bench-cache")
    on_s3 = bench_on_store(ParquetTableIOManager(base_dir="s3://bench-cache/nightly",
                                                 storage_options={"endpoint_url": endpoint, **CREDENTIALS}))

    def read_object(asset: str) -> pa.Table:
        body = client.get_object(Bucket="bench-cache", Key=f"nightly/{asset}/{BATCH_SIZE}__tiny-qwen2-vl.parquet")
        return pq.read_table(pa.BufferReader(body["Body"].read()))
    return on_s3, read_object


def test_every_row_is_reported_or_rejected_and_the_parquet_is_in_the_store(backend, monkeypatch):
    bench, read = backend
    assert bench.materialize_rows(RUN).success
    poison_first_latency(monkeypatch)
    assert bench.run_partition(BATCH_SIZE, RUN).success

    generations = read("generations")
    assert generations.num_rows == ROWS_IN  # the cache keeps every generation, the broken one included
    assert pc.min(generations.column("latency_ms")).as_py() == -5.0
    assert read("reward_scores").num_rows == ROWS_IN
    reported = bench.partition_counts(RUN, BATCH_SIZE)
    rejected = bench.query("SELECT sample_id, reason FROM rejected_rows WHERE run_id = ? AND dataset = 'generations'",
                           [RUN])
    assert reported["generations"] + len(rejected) == ROWS_IN
    assert reported["generations"] == reported["reward_scores"] == ROWS_IN - 1
    assert rejected[0][0] == generations.column("sample_id")[0].as_py()
    assert "latency_ms" in rejected[0][1]


def test_an_unreachable_store_fails_the_step_naming_its_url(bench_on_store):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = "s3://bench-cache/unreachable"
    bench = bench_on_store(ParquetTableIOManager(base_dir=url, storage_options={
        "endpoint_url": f"http://127.0.0.1:{port}", **CREDENTIALS,
        "config_kwargs": {"connect_timeout": 1, "retries": {"max_attempts": 1}}}))
    outcome = dg.materialize([bench.defs.get_assets_def("easy_vqa_rows")], resources=bench.env.resources,
                             instance=bench.env.instance, raise_on_error=False,
                             run_config={"ops": {"easy_vqa_rows": {"config": {"limit": 2}}}})
    assert not outcome.success
    error = outcome.get_step_failure_events()[0].step_failure_data.error.to_string()
    assert f"could not upload {url}/easy_vqa_rows/all.parquet" in error
    failure = failure_from_results([outcome])  # what `aerorl bench` prints: one line, exit 1
    assert failure.exit_code == 1 and "\n" not in failure.message
    assert f"could not upload {url}/easy_vqa_rows/all.parquet" in failure.message
