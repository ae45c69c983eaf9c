"""`aerorl train` end to end on a tiny run: it prints the run's evaluations and summary line (the rl_run
materialization's, not one of its checkpoints') and lists the checkpoints it recorded as references."""

from __future__ import annotations

import uuid

import aerorl_pipeline.definitions as definitions
from aerorl_pipeline import cli


def test_train_prints_the_run_and_its_checkpoint_references(dagster_env, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.setattr(definitions, "default_resources", lambda storage=None: dagster_env.resources)
    run = f"cli-{uuid.uuid4().hex[:8]}"
    argv = ["train", "--run-name", run, "--warmup-steps", "1", "--warmup-batch-size", "2", "--steps", "1",
            "--prompts-per-step", "2", "--group-size", "2", "--eval-size", "4", "--checkpoint-interval", "1",
            "--no-control", "--swap-check-type", "", "--sampled-eval-size", "0", "--train-limit", "16"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert f"\nrun {run}: warm-up accuracy " in out and "final accuracy" in out
    assert out.rstrip().endswith(f"checkpoints (usable wherever a model key is): {run}@1, {run}@2")
