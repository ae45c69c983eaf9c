"""The two jobs: the partitioned benchmark, and training."""

from __future__ import annotations

import dagster as dg

from assets.generation import generations
from assets.reports import benchmark_report
from assets.scoring import reward_scores
from assets.training import rl_run

benchmark_job = dg.define_asset_job(
    "benchmark",
    selection=dg.AssetSelection.assets(generations, reward_scores, benchmark_report),
    description="Generate, score and report one model x batch-size partition.",
)

training_job = dg.define_asset_job(
    "training",
    selection=dg.AssetSelection.assets(rl_run),
    description="Masked-loss RL of a policy against a frozen quantized reference.",
)
