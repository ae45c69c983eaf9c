"""The rows asset of an environment a run draws: the items as the environment's loader draws them, what
they were drawn from, and their content hash as the data version."""

from __future__ import annotations

import dagster as dg

from aerorl_ops.envs.cached import items_sha256
from aerorl_ops.rl.run.inputs import training_environments
from aerorl_ops.rows.item_table import table_to_items
from aerorl_pipeline.definitions import build_definitions
from assets.project import benchmark_config

HELD_OUT = dg.AssetKey(["training", "held_out_rows"])


def test_the_held_out_rows_are_the_runs_held_out_items_with_their_source_and_hash(dagster_env):
    bench = benchmark_config()
    result = build_definitions(bench, dagster_env.resources).resolve_implicit_global_asset_job_def() \
        .execute_in_process(asset_selection=[HELD_OUT], instance=dagster_env.instance)
    (event,) = result.get_asset_materialization_events()
    materialization = event.materialization
    _, held_out = training_environments(bench.training, bench.seed + bench.training.seed, bench.datasets)
    stored = dagster_env.resources["io_manager"].stored_table(HELD_OUT)
    assert table_to_items(stored) == list(held_out.items) and len(held_out) == 500
    content = items_sha256(held_out.items)
    assert materialization.tags["dagster/data_version"] == content == materialization.metadata["content_sha256"].value
    assert (materialization.metadata["dagster/row_count"].value, materialization.metadata["rows_rejected"].value) == (
        500, 0)
    source = materialization.metadata["source_fingerprint"].value
    assert (source["location"], dict(source["settings"])) == (
        "package easy-vqa", {"limit": "500", "seed": "0", "split": '"test"'})
    assert "items_not_kept" not in materialization.metadata
