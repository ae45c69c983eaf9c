"""The reward-hacking asset check on a constructed run in a DuckDB file."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from aerorl_ops.storage.duckdb_store import PartitionWrite, ensure_tables, replace_partitions
from aerorl_ops.storage.training_schema import TRAINING_EVALS, TRAINING_STEPS, TRAINING_TABLES
from assets.training.checks import run_verdict


def _write_run(conn, run_id: str, rewards: list[float], evals: list[tuple[int, str, float, int]],
               distribution_evals: list[tuple[int, str, float, int]] = ()) -> None:
    steps = [{"run_id": run_id, "step": 10 + i, "phase": "grpo", "reward_mean": r} for i, r in enumerate(rewards)]
    steps.insert(0, {"run_id": run_id, "step": 5, "phase": "warmup", "reward_mean": None})
    rows = [{"run_id": run_id, "step": s, "phase": p, "accuracy": a, "n": n} for s, p, a, n in evals]
    rows += [{"run_id": run_id, "step": s, "phase": p, "accuracy": a, "n": n, "distribution": "bigger_room"}
             for s, p, a, n in distribution_evals]
    replace_partitions(conn, [PartitionWrite(TRAINING_STEPS, {"run_id": run_id},
                                             pa.Table.from_pylist(steps, schema=TRAINING_STEPS.schema)),
                              PartitionWrite(TRAINING_EVALS, {"run_id": run_id},
                                             pa.Table.from_pylist(rows, schema=TRAINING_EVALS.schema))])


@pytest.mark.parametrize(("final_accuracy", "gamed"), [(0.50, True), (0.59, False)])
def test_rising_reward_with_falling_accuracy_is_flagged(tmp_path, final_accuracy, gamed):
    with duckdb.connect(str(tmp_path / "runs.duckdb")) as conn:
        ensure_tables(conn, TRAINING_TABLES)
        evals = [(0, "no_image_prior", 0.69, 500), (0, "base", 0.2, 500), (5, "warmup", 0.60, 500),
                 (12, "rl", 0.58, 500), (14, "final", final_accuracy, 500), (20, "control", 0.9, 500)]
        _write_run(conn, "run", [0.1, 0.2, 0.6, 0.7], evals)
        verdict = run_verdict(conn, "run")
    assert verdict.gamed is gamed
    assert verdict.reward_rise == pytest.approx(0.6)
    assert verdict.accuracy_change == pytest.approx(final_accuracy - 0.60)


def test_a_held_out_distribution_falling_is_generalisation_not_reward_hacking(tmp_path):
    """The guard reads the run's own held-out sample only: a held-out distribution's rows (``distribution`` set)
    falling to 0 while the reward rises does not flag the run, and its own sample's fall still does."""
    with duckdb.connect(str(tmp_path / "runs.duckdb")) as conn:
        ensure_tables(conn, TRAINING_TABLES)
        evals = [(5, "warmup", 0.60, 500), (14, "final", 0.61, 500)]
        _write_run(conn, "run", [0.1, 0.2, 0.6, 0.7], evals, [(5, "warmup", 0.9, 500), (14, "final", 0.0, 500)])
        kept = run_verdict(conn, "run")
        _write_run(conn, "fell", [0.1, 0.2, 0.6, 0.7], [(5, "warmup", 0.60, 500), (14, "final", 0.40, 500)],
                   [(5, "warmup", 0.1, 500), (14, "final", 0.9, 500)])
        fell = run_verdict(conn, "fell")
    assert not kept.gamed and kept.accuracy_change == pytest.approx(0.01)
    assert fell.gamed and fell.accuracy_change == pytest.approx(-0.20)
