"""The Parquet IO manager on an S3 URL, against a real S3-compatible server (moto in server mode)
started by the test: exact round trips, safe object keys, atomic uploads and reruns."""

from __future__ import annotations

import re

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from assets.io_managers import ParquetTableIOManager

boto3 = pytest.importorskip("boto3")

BUCKET = "aerorl-test"
CREDENTIALS = {"key": "testing", "secret": "testing"}  # the moto server accepts any


@pytest.fixture
def s3(s3_endpoint: str, request: pytest.FixtureRequest):
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1",
                          aws_access_key_id=CREDENTIALS["key"], aws_secret_access_key=CREDENTIALS["secret"])
    bucket = f"{BUCKET}-{request.node.name.replace('_', '-').lower()[:40]}"
    client.create_bucket(Bucket=bucket)
    return client, bucket


def manager_for(endpoint: str, bucket: str) -> ParquetTableIOManager:
    return ParquetTableIOManager(base_dir=f"s3://{bucket}/cache",
                                 storage_options={"endpoint_url": endpoint, **CREDENTIALS})


def object_keys(client, bucket: str) -> list[str]:
    return sorted(item["Key"] for item in client.list_objects_v2(Bucket=bucket).get("Contents", []))


def output(partition_key: str | None, asset: str = "generations") -> dg.OutputContext:
    return dg.build_output_context(asset_key=dg.AssetKey(asset), partition_key=partition_key)


def load(manager: ParquetTableIOManager, partition_key: str | None, asset: str = "generations") -> pa.Table:
    return manager.load_input(dg.build_input_context(
        asset_key=dg.AssetKey(asset), partition_key=partition_key,
        asset_partitions_def=dg.StaticPartitionsDefinition([partition_key]) if partition_key else None))


def test_a_table_round_trips_exactly(s3_endpoint, s3):
    client, bucket = s3
    manager = manager_for(s3_endpoint, bucket)
    table = pa.table({"sample_id": ["a", "b", None], "score": [1.0, 0.25, -3.5],
                      "tokens": pa.array([[1, 2], [], [3]], pa.list_(pa.field("element", pa.int32())))})
    manager.handle_output(output("4|tiny-qwen2-vl"), table)

    assert object_keys(client, bucket) == ["cache/generations/4__tiny-qwen2-vl.parquet"]
    assert load(manager, "4|tiny-qwen2-vl").equals(table)


def test_unsafe_partition_keys_map_to_safe_object_keys(s3_endpoint, s3):
    client, bucket = s3
    manager = manager_for(s3_endpoint, bucket)
    for key in ["../../escape", "a/b", "a_b", "a|b"]:
        manager.handle_output(output(key), pa.table({"partition": [key]}))

    keys = object_keys(client, bucket)
    assert [re.sub("-[0-9a-f]{12}[.]", "-<hash>.", key) for key in keys] == [
        "cache/generations/.._.._escape-<hash>.parquet",  # "/" replaced: one object name, no folders
        "cache/generations/a__b.parquet",  # "a|b": dimensions joined by "__"
        "cache/generations/a_b-<hash>.parquet",  # "a/b" had to change, so it carries a hash
        "cache/generations/a_b.parquet",  # already safe
    ]
    for key in ["../../escape", "a/b", "a_b", "a|b"]:
        assert load(manager, key).column("partition").to_pylist() == [key]
    with pytest.raises(ValueError, match="unsafe path component"):
        manager.handle_output(output("..|x"), pa.table({"partition": ["x"]}))
    assert object_keys(client, bucket) == keys


def test_a_failed_write_leaves_the_previous_object_and_nothing_else(s3_endpoint, s3, monkeypatch):
    client, bucket = s3
    manager = manager_for(s3_endpoint, bucket)
    manager.handle_output(output("4|m"), pa.table({"sample_id": ["old-1", "old-2"]}))
    previous = client.get_object(Bucket=bucket, Key="cache/generations/4__m.parquet")["Body"].read()

    def write_half_then_fail(table, where, **kwargs):
        where.write(b"PAR1 half a file")
        raise OSError("serialization failed")

    with monkeypatch.context() as patched:
        patched.setattr("assets.io_managers.pq.write_table", write_half_then_fail)
        with pytest.raises(OSError, match="serialization failed"):
            manager.handle_output(output("4|m"), pa.table({"sample_id": ["new"]}))
        with pytest.raises(OSError, match="serialization failed"):
            manager.handle_output(output("8|m"), pa.table({"sample_id": ["new"]}))

    def upload_fails(path, data, **kwargs):
        raise ConnectionError(f"connection reset while uploading {path}")

    with monkeypatch.context() as patched:  # the manager's (cached) filesystem instance
        patched.setattr(manager._path(dg.AssetKey("generations"), "4|m").fs, "pipe_file", upload_fails)
        uploading = rf"could not upload s3://{bucket}/cache/generations/4__m.parquet: connection"
        with pytest.raises(OSError, match=uploading):
            manager.handle_output(output("4|m"), pa.table({"sample_id": ["new"]}))

    assert object_keys(client, bucket) == ["cache/generations/4__m.parquet"]
    assert client.get_object(Bucket=bucket, Key="cache/generations/4__m.parquet")["Body"].read() == previous
    assert load(manager, "4|m").column("sample_id").to_pylist() == ["old-1", "old-2"]


def test_a_rerun_overwrites_the_same_object(s3_endpoint, s3):
    client, bucket = s3
    manager = manager_for(s3_endpoint, bucket)
    manager.handle_output(output("4|m"), pa.table({"run": ["first"] * 3}))
    manager.handle_output(output("4|m"), pa.table({"run": ["second"]}))

    assert object_keys(client, bucket) == ["cache/generations/4__m.parquet"]
    assert load(manager, "4|m").column("run").to_pylist() == ["second"]


def test_a_missing_partition_names_its_url(s3_endpoint, s3):
    _, bucket = s3
    with pytest.raises(FileNotFoundError, match=rf"s3://{bucket}/cache/generations/7__m\.parquet is missing"):
        load(manager_for(s3_endpoint, bucket), "7|m")


def test_a_missing_bucket_fails_naming_the_url(s3_endpoint):
    manager = manager_for(s3_endpoint, "no-such-bucket")
    with pytest.raises(OSError, match=r"could not upload s3://no-such-bucket/cache/generations/1\.parquet"):
        manager.handle_output(output("1"), pa.table({"value": [1]}))


SIZES = dg.StaticPartitionsDefinition(["1", "4"])


@dg.asset(partitions_def=SIZES)
def sized(context) -> pa.Table:
    return pa.table({"size": [int(context.partition_key)] * int(context.partition_key)})


@dg.asset(partitions_def=SIZES)
def doubled(sized: pa.Table) -> pa.Table:
    return pa.table({"size": pc.multiply(sized.column("size"), 2)})


def test_a_partitioned_materialization_writes_and_reads_through_s3(s3_endpoint, s3):
    client, bucket = s3
    resources = {"io_manager": manager_for(s3_endpoint, bucket)}
    with dg.DagsterInstance.ephemeral() as instance:
        for key in SIZES.get_partition_keys():
            result = dg.materialize([sized, doubled], partition_key=key, resources=resources, instance=instance)
            assert result.success

    assert object_keys(client, bucket) == ["cache/doubled/1.parquet", "cache/doubled/4.parquet",
                                           "cache/sized/1.parquet", "cache/sized/4.parquet"]
    body = client.get_object(Bucket=bucket, Key="cache/doubled/4.parquet")["Body"]
    assert pq.read_table(pa.BufferReader(body.read())).column("size").to_pylist() == [8, 8, 8, 8]
