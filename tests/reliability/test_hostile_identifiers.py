"""Reliability: hostile identifiers never reach SQL unparameterised and never write outside their folders.

Model ids, partition keys, run ids and sample ids full of quotes, semicolons, comment markers,
``../`` and path separators:

* (a) as model keys they are refused by config validation (partition keys are safe slugs);
* (b) as run ids and sample ids they round-trip through ``replace_partitions`` / ``write_run``
  into DuckDB unchanged, and no table is dropped or touched outside its partition;
* (c) as partition keys and asset keys the Parquet IO manager writes them only under its base
  folder, each key to a file of its own;
* (d) as the ``aerorl/benchmark_run`` tag, and as sample ids in a DocVQA file, a real partition
  materializes with every file under the test's own folders and every value stored verbatim.
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from aerorl_ops.config.benchmark import ConfigError, parse_benchmark_config
from aerorl_ops.storage.duckdb_store import PartitionWrite, ensure_tables, replace_partitions, transaction, write_run
from aerorl_ops.storage.schema import BENCHMARK_TABLES, GENERATIONS, REJECTED_ROWS, TableSpec
from aerorl_pipeline.bench import plan_bench
from aerorl_pipeline.definitions import build_definitions
from assets.io_managers import ParquetTableIOManager
from assets.runs import BENCHMARK_RUN_TAG

PROJECT = build_definitions()  # the shipped config file
ROWS_DEFS = [PROJECT.get_assets_def(name) for name in ("docvqa_rows", "chartqa_rows", "easy_vqa_rows", "arc_rows")]

HOSTILE = [
    "a'; DROP TABLE runs;--",
    'x"); DELETE FROM generations; --',
    "../../../../tmp/escape",
    "..\\..\\windows\\system32",
    "/etc/passwd",
    "..",
    "' OR '1'='1",
    "?; $1; %s; {0}",
    "line\nbreak\ttab ünï’cødé",
]


# --- (a) model keys ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", HOSTILE + ["a/b", "Tiny", "x" * 65, ""])
def test_hostile_model_key_is_refused_by_config_validation(key):
    data = {"benchmark": {"batch_sizes": [1]}, "models": {key: {"source": "embedded:tiny-qwen2-vl"}}}
    with pytest.raises(ConfigError, match="is not a safe partition key"):
        parse_benchmark_config(data, path="bench.toml")


@pytest.mark.parametrize("key", ["a'; DROP TABLE runs;--", "../x", "tiny-qwen2-vl/../x"])
def test_hostile_model_key_is_refused_by_plan_bench(key):
    with pytest.raises(ConfigError, match="unknown model key"):
        plan_bench([key])


# --- (b) run ids and sample ids in DuckDB -----------------------------------------------------------------

def value_for(sql_type: str, text: str) -> object:
    if sql_type.startswith("VARCHAR[]"):
        return [text, "plain"]
    if sql_type.startswith("VARCHAR") or sql_type.startswith("JSON"):
        return text
    if sql_type.startswith("INTEGER"):
        return 7
    if sql_type.startswith("DOUBLE"):
        return 1.5
    raise AssertionError(f"no test value for {sql_type}")


def rows_for(spec: TableSpec, key: dict, texts: list[str]) -> pa.Table:
    """One row per text: partition columns from ``key``, every other text column set to the text."""
    records = [{name: key[name] if name in key else value_for(sql_type, text) for name, sql_type in spec.columns}
               for text in texts]
    return pa.Table.from_pylist(records)


def tables(conn) -> set[str]:
    return {name for (name,) in conn.execute("SELECT table_name FROM information_schema.tables").fetchall()}


def test_hostile_run_and_sample_ids_round_trip_and_drop_nothing(tmp_path):
    database = str(tmp_path / "report.duckdb")
    with duckdb.connect(database) as conn:
        ensure_tables(conn)
        bystander = {"run_id": "bystander", "model_key": "m", "batch_size": 1}
        replace_partitions(conn, [PartitionWrite(GENERATIONS, bystander, rows_for(GENERATIONS, bystander, ["ok"]))])
        for _ in range(2):  # the rerun replaces each partition through the same parameterised DELETE
            for run_id in HOSTILE:
                key = {"run_id": run_id, "model_key": "m", "batch_size": 4}
                rejected_key = {"run_id": run_id, "stage": run_id, "dataset": run_id}
                replace_partitions(conn, [
                    PartitionWrite(GENERATIONS, key, rows_for(GENERATIONS, key, HOSTILE)),
                    PartitionWrite(REJECTED_ROWS, rejected_key, rows_for(REJECTED_ROWS, rejected_key, HOSTILE)),
                ])
                with transaction(conn):
                    write_run(conn, {"run_id": run_id, "kind": run_id, "config": '{"note": "' + run_id.replace(
                        "\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"}'})

        assert tables(conn) >= {spec.name for spec in BENCHMARK_TABLES}
        assert conn.execute("SELECT sample_id FROM generations WHERE run_id = 'bystander'").fetchall() == [("ok",)]
        for run_id in HOSTILE:
            stored = conn.execute("SELECT sample_id, prompt, reference, model_key, batch_size FROM generations "
                                  "WHERE run_id = ? ORDER BY sample_id", [run_id]).fetchall()
            assert stored == sorted((text, text, [text, "plain"], "m", 4) for text in HOSTILE)
            rejected = conn.execute("SELECT sample_id, reason FROM rejected_rows WHERE run_id = ? AND stage = ? "
                                    "AND dataset = ? ORDER BY sample_id", [run_id, run_id, run_id]).fetchall()
            assert rejected == sorted((text, text) for text in HOSTILE)
            assert conn.execute("SELECT kind, config->>'note' FROM runs WHERE run_id = ?", [run_id]).fetchall() \
                == [(run_id, run_id)]
        assert conn.execute("SELECT count(*) FROM generations").fetchone()[0] == 1 + len(HOSTILE) ** 2
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == len(HOSTILE)


# --- (c) the Parquet IO manager ---------------------------------------------------------------------------

def files_under(root: Path) -> set[Path]:
    return {Path(folder) / name for folder, _, names in os.walk(root) for name in names}


@pytest.mark.parametrize("asset_path", [["generations"], ["..", "x"], ["a/../../b"], ["..\\x", "y z"], ["."]])
@pytest.mark.parametrize("partition_key", ["../../etc/passwd", "a/../../b|4", "/abs/path", "..|x", "...",
                                           "x'; DROP TABLE runs;--", None])
def test_io_manager_writes_only_under_its_base_folder(tmp_path, asset_path, partition_key):
    base = tmp_path / "deep" / "cache"
    manager = ParquetTableIOManager(base_dir=str(base))
    context = dg.build_output_context(asset_key=dg.AssetKey(asset_path), partition_key=partition_key)
    table = pa.table({"value": [1, 2, 3]})
    try:
        manager.handle_output(context, table)
    except ValueError as refused:  # a component that is exactly "." or ".." is refused outright
        assert "unsafe path component" in str(refused)
        assert files_under(tmp_path) == set()
        return
    (written,) = files_under(tmp_path)
    assert written.resolve().is_relative_to(base.resolve())
    assert written.suffix == ".parquet" and written.parent.parent == base
    assert pq.read_table(written).equals(table)


HOSTILE_PARTITIONS = dg.StaticPartitionsDefinition(
    ["a/b", "a_b", "a|b", "a__b", "../../escape", "x'; DROP TABLE runs;--", "..\\up"])


@dg.asset(partitions_def=HOSTILE_PARTITIONS)
def keyed(context) -> pa.Table:
    return pa.table({"partition": [context.partition_key]})


@dg.asset(partitions_def=HOSTILE_PARTITIONS)
def echoed(keyed: pa.Table) -> pa.Table:
    return keyed


def test_every_hostile_partition_gets_its_own_file_inside_base(tmp_path):
    base = tmp_path / "cache"
    resources = {"io_manager": ParquetTableIOManager(base_dir=str(base))}
    with dg.DagsterInstance.ephemeral() as instance:
        for key in HOSTILE_PARTITIONS.get_partition_keys():
            dg.materialize([keyed, echoed], partition_key=key, resources=resources, instance=instance)

    files = files_under(tmp_path)
    assert len(files) == 2 * len(HOSTILE_PARTITIONS.get_partition_keys())  # no two keys share a file
    assert all(path.resolve().is_relative_to(base.resolve()) for path in files)
    # what each partition's downstream read back is its own upstream value, never another key's
    stored = sorted(pq.read_table(path).column("partition")[0].as_py() for path in files
                    if path.parent.name == "echoed")
    assert stored == sorted(HOSTILE_PARTITIONS.get_partition_keys())
    # safe keys keep readable names; keys that had to change carry a hash of the original
    assert pq.read_table(base / "keyed" / "a_b.parquet").column("partition")[0].as_py() == "a_b"
    assert pq.read_table(base / "keyed" / "a__b.parquet").column("partition")[0].as_py() == "a|b"


# --- (d) a real partition with a hostile run tag and hostile sample ids ------------------------------------

def snapshot(*roots: Path) -> set[Path]:
    return {path for root in roots for path in files_under(root)}


HOSTILE_RUN_TAG = "../../../evil'; DROP TABLE runs;--/x"
HOSTILE_QUESTION_IDS = ["1'; DROP TABLE generations;--", "../../../../tmp/escape", 'q"; DELETE FROM runs; --']


def test_hostile_run_tag_and_sample_ids_through_a_real_partition(tmp_path, bench_factory, models_dir,
                                                                 docvqa_file, png_bytes):
    env_root = tmp_path / "env"
    bench = bench_factory(env_root)
    records = [(question_id, ["42"], png_bytes(60 * i)) for i, question_id in enumerate(HOSTILE_QUESTION_IDS)]
    inputs = docvqa_file(tmp_path / "inputs" / "validation.parquet", records)
    watched = (tmp_path.parent, models_dir)  # this session's tmp folders (other tests' and the model's)
    before = snapshot(*watched)
    rows_config = {"ops": {"docvqa_rows": {"config": {"files": [str(inputs)]}},
                           "chartqa_rows": {"config": {"limit": 1}}, "easy_vqa_rows": {"config": {"limit": 1}},
                           "arc_rows": {"config": {"limit": 1}}}}

    dg.materialize(ROWS_DEFS, resources=bench.env.resources, instance=bench.env.instance,
                   tags={BENCHMARK_RUN_TAG: HOSTILE_RUN_TAG}, run_config=rows_config)
    result = bench.run_partition(4, HOSTILE_RUN_TAG)

    assert result.success
    written = snapshot(*watched) - before
    assert written and all(path.is_relative_to(env_root) for path in written), sorted(
        str(path) for path in written if not path.is_relative_to(env_root))
    (artifact,) = [path for path in written if path.suffix == ".json"]
    assert artifact.parent.parent == env_root and ".." not in artifact.name and "/" not in artifact.stem

    expected_ids = sorted(f"docvqa-{question_id}" for question_id in HOSTILE_QUESTION_IDS)
    with duckdb.connect(str(bench.duckdb_path), read_only=True) as conn:
        assert tables(conn) >= {spec.name for spec in BENCHMARK_TABLES}
        for table in ("generations", "reward_scores"):
            stored = conn.execute(f"SELECT sample_id FROM {table} WHERE run_id = ? AND sample_id LIKE 'docvqa-%' "
                                  "ORDER BY sample_id", [HOSTILE_RUN_TAG]).fetchall()
            assert [sample_id for (sample_id,) in stored] == expected_ids
        # the 3 hostile DocVQA rows, 1 ChartQA row, 1 easy-VQA row, 1 ARC row
        assert conn.execute("SELECT count(*) FROM generations").fetchone()[0] == 6
        assert conn.execute("SELECT run_id FROM runs").fetchall() == [(HOSTILE_RUN_TAG,)]


def test_training_run_name_cannot_point_checkpoints_outside_data(dagster_env, monkeypatch):
    from assets.project import DATA_DIR

    checkpoint_dirs: list[Path] = []

    def capture_run_dir(run):
        checkpoint_dirs.append(Path(run.run_dir))
        raise RuntimeError("stop before training")

    monkeypatch.setattr("aerorl_ops.rl.run.phases.TrainingRun.run", capture_run_dir)
    settings = {"run_name": "../../outside-data", "train_limit": 2, "eval_size": 2}
    rl_run = PROJECT.get_assets_def("rl_run")
    result = dg.materialize([rl_run], resources=dagster_env.resources, instance=dagster_env.instance,
                            run_config={"ops": {"rl_run": {"config": settings}}}, raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert "run_name" in str(failure.event_specific_data.error)

    assert checkpoint_dirs == []  # rejected before training (and before any model loads)
    assert not (DATA_DIR.parent / "outside-data").exists()
