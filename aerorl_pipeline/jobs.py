"""The jobs: the partitioned benchmark, training, evaluation, and the evaluation of a checkpoint. They select
assets by key, so they fit the definitions built from any config file."""

from __future__ import annotations

import dagster as dg

BENCHMARK_ASSETS = ("generations", "reward_scores", "benchmark_report")



def build_benchmark_job(executor_def: dg.ExecutorDefinition | None = None) -> dg.UnresolvedAssetJobDefinition:
    """The ``benchmark`` job, on ``executor_def`` (None: Dagster's default; see ``executors``)."""
    return dg.define_asset_job(
        "benchmark",
        selection=dg.AssetSelection.assets(*BENCHMARK_ASSETS),
        description="Generate, score and report one model x batch-size partition.",
        executor_def=executor_def,
    )


benchmark_job = build_benchmark_job()

training_job = dg.define_asset_job(
    "training",
    selection=dg.AssetSelection.assets("rl_run"),
    description="Masked-loss RL of a policy against a frozen quantized reference.",
)

evaluation_job = dg.define_asset_job(
    "evaluation",
    selection=dg.AssetSelection.assets("eval_run"),
    description="A model against its baseline at MAYE's three sampling settings, with paired intervals.",
)

checkpoint_evaluation_job = dg.define_asset_job(
    "checkpoint_evaluation",
    selection=dg.AssetSelection.assets("checkpoint_eval"),
    description="A training checkpoint (partition <run_id>@<step>) against its base model, at the [eval] settings.",
)
