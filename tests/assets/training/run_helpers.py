"""What the rl_run tests share: where a run's checkpoints are, and a run's ``rl_run`` materialization."""

from __future__ import annotations

from pathlib import Path

from aerorl_ops.models.checkpoint_refs import checkpoints_dir


def run_checkpoints(env, run_name: str) -> Path:
    """Where the run's checkpoints are: beside the test's models folder."""
    return checkpoints_dir(Path(env.resources["model_runtime"].models_dir)) / run_name


def rl_run_materialization(result):
    """The run's ``rl_run`` materialization (the step also records its ``checkpoints`` partitions)."""
    (materialization,) = [event for event in result.asset_materializations_for_node("rl_run")
                          if event.asset_key.path == ["rl_run"]]
    return materialization
