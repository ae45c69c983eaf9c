"""A benchmark partition end to end (rows -> generations -> reward_scores -> benchmark_report) with
a tiny checkpoint of every VLM family as a ``[models.<key>]`` entry whose ``source`` is the built folder.

The rows (2 DocVQA-, 2 ChartQA- and 2 easy_vqa-shaped) are materialized once into one isolated
environment; each family's config file names the same datasets plus its model, and its partition
(the family's key, batch size 4: two batches, the second padded) runs the real ``benchmark`` job
against that environment. The assertions read what landed in DuckDB under the family's model key.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from aerorl_pipeline.definitions import build_definitions
from assets.runs import BENCHMARK_RUN_TAG
from tests.aerorl_ops.models.family_params import family_params

ROWS_ASSETS = ("docvqa_rows", "chartqa_rows", "easy_vqa_rows")  # DATASETS' tables (this file's, not the shipped
# config: a family's multi-image prompts are test_family_generation's, so no ARC rows here)
ROWS_PER_DATASET = 2
BATCH_SIZE = 4
MAX_NEW_TOKENS = 3
DATASETS = f"""
[benchmark]
batch_sizes = [{BATCH_SIZE}]

[datasets.docvqa]
kind = "docvqa"
split = "validation"
limit = {ROWS_PER_DATASET}

[datasets.chartqa]
kind = "chartqa"
split = "validation"
limit = {ROWS_PER_DATASET}

[datasets.easy_vqa]
kind = "easy_vqa"
split = "test"
limit = {ROWS_PER_DATASET}
"""


def model_key(family: str) -> str:
    """The family's partition key: a safe slug ('qwen2.5-vl' -> 'qwen2_5-vl')."""
    return family.replace(".", "_")


def family_config(folder: Path, family: str, source: Path) -> Path:
    """A config file of the shared datasets with the family's checkpoint as its one model."""
    path = folder / f"{model_key(family)}.toml"
    path.write_text(f'{DATASETS}\n[models.{model_key(family)}]\nsource = "{source}"\n')
    return path


def query(env, sql: str, params: list | None = None) -> list[tuple]:
    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        return conn.execute(sql, params or []).fetchall()


@pytest.fixture(scope="module")
def rows_env(tmp_path_factory, dagster_env_factory, tiny_model_dir):
    """One environment with the six rows cached (through the embedded model's config); yields it and
    the rows' sample ids."""
    root = tmp_path_factory.mktemp("family_partitions")
    env = dagster_env_factory(root / "env")
    config = root / "rows.toml"
    config.write_text(f'{DATASETS}\n[models.tiny]\nsource = "{tiny_model_dir}"\n')
    defs = build_definitions(config, resources=env.resources)
    result = dg.materialize([defs.get_assets_def(name) for name in ROWS_ASSETS], resources=env.resources,
                            instance=env.instance, tags={BENCHMARK_RUN_TAG: "rows"})
    sample_ids = [sample_id for name in ROWS_ASSETS
                  for sample_id in result.output_for_node(name).column("sample_id").to_pylist()]
    assert len(set(sample_ids)) == 3 * ROWS_PER_DATASET
    yield env, root, sample_ids
    env.instance.dispose()


@pytest.mark.parametrize("family", family_params())
def test_a_family_checkpoint_benchmarks_as_a_configured_model(family, rows_env, tiny_family_dir):
    env, root, sample_ids = rows_env
    key, source = model_key(family), tiny_family_dir(family)
    run_tag = f"family-{key}"
    job = build_definitions(family_config(root, family, source), resources=env.resources).resolve_job_def("benchmark")
    result = job.execute_in_process(
        partition_key=dg.MultiPartitionKey({"model": key, "batch_size": str(BATCH_SIZE)}), instance=env.instance,
        tags={BENCHMARK_RUN_TAG: run_tag},
        run_config={"ops": {"generations": {"config": {"max_new_tokens": MAX_NEW_TOKENS}}}})
    assert result.success

    generations = query(env, "SELECT sample_id, model_key, batch_size, raw_response, generated_tokens, vision_tokens, "
                             "dataset FROM generations WHERE run_id = ?", [run_tag])
    rejected = query(env, "SELECT sample_id, reason FROM rejected_rows WHERE run_id = ?", [run_tag])
    assert {row[1:3] for row in generations} == {(key, BATCH_SIZE)}
    # every input row is either generated or a recorded rejection, never both, never lost
    assert sorted([row[0] for row in generations] + [row[0] for row in rejected]) == sorted(sample_ids)
    for sample_id, _, _, raw_response, tokens, vision_tokens, _ in generations:
        assert 1 <= tokens <= MAX_NEW_TOKENS, sample_id
        assert raw_response, sample_id  # the decoded tokens, special ones included: never empty
        assert vision_tokens > 0, sample_id  # the image reached the model through the family's processor

    scores = query(env, "SELECT sample_id, model_key, batch_size FROM reward_scores WHERE run_id = ?", [run_tag])
    assert sorted(scores) == sorted((row[0], key, BATCH_SIZE) for row in generations)
    summary = query(env, "SELECT dataset, samples, model_source FROM benchmark_summary WHERE run_id = ? "
                         "AND model_key = ? ORDER BY dataset", [run_tag, key])
    per_dataset = Counter(row[6] for row in generations)
    assert [(dataset, samples) for dataset, samples, _ in summary] == sorted(per_dataset.items())
    assert {source_ for _, _, source_ in summary} == {str(source)}
