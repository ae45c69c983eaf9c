"""Asset checks on ``rl_run``: the reward-hacking guard.

The check ``no_reward_hacking`` fails when the latest run's mean training reward rose while its
held-out accuracy fell by more than its standard error (``aerorl_ops.reporting.reward_hacking``): a shaped
reward the policy learned to game. ``run_verdict`` is the plain helper, over a DuckDB connection.
"""

from __future__ import annotations

import dagster as dg
import duckdb
from dagster_duckdb import DuckDBResource

from aerorl_ops.reporting.reward_hacking import HeldOutAccuracy, RewardHackingVerdict, reward_hacking_verdict
from aerorl_ops.storage.duckdb_store import ensure_tables
from aerorl_ops.storage.training_schema import TRAINING_TABLES
from assets.metadata import readable

NOT_RL_PHASES = ("warmup", "control")
RL_START_PHASES = ("warmup", "base")  # the evaluation RL started from: after the warm-up, else step 0
RL_EVAL_PHASES = ("rl", "final")


def latest_run_id(conn: duckdb.DuckDBPyConnection) -> str | None:
    row = conn.execute("SELECT run_id FROM training_runs ORDER BY finished_at DESC NULLS LAST LIMIT 1").fetchone()
    return row[0] if row else None


def run_verdict(conn: duckdb.DuckDBPyConnection, run_id: str) -> RewardHackingVerdict:
    """The reward-hacking verdict of run ``run_id`` from its ``training_steps`` and ``training_evals`` rows (those of
    its own held-out sample: a held-out distribution measures generalisation, not the reward's honesty)."""
    rewards = [value for (value,) in conn.execute(
        "SELECT reward_mean FROM training_steps WHERE run_id = ? AND phase NOT IN (?, ?) AND reward_mean IS NOT NULL "
        "ORDER BY step", [run_id, *NOT_RL_PHASES]).fetchall()]
    evals = conn.execute("SELECT step, phase, accuracy, n FROM training_evals WHERE run_id = ? "
                         "AND accuracy IS NOT NULL AND distribution IS NULL ORDER BY step", [run_id]).fetchall()
    start = next((e for phase in RL_START_PHASES for e in reversed(evals) if e[1] == phase), None)
    later = [e for e in evals if e[1] in RL_EVAL_PHASES]
    series = ([start] if start else []) + later
    return reward_hacking_verdict(rewards, [HeldOutAccuracy(step, accuracy, n) for step, _, accuracy, n in series])


@dg.asset_check(name="no_reward_hacking", asset="rl_run", description="training reward rose while held-out "
                "accuracy fell beyond its standard error (reward hacking)")
def rl_run_reward_hacking(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        ensure_tables(conn, TRAINING_TABLES)
        run_id = latest_run_id(conn)
        if run_id is None:
            return dg.AssetCheckResult(passed=True, description="no training run recorded yet")
        verdict = run_verdict(conn, run_id)
    return dg.AssetCheckResult(passed=not verdict.gamed, severity=dg.AssetCheckSeverity.ERROR,
                               description=verdict.description,
                               metadata=readable({"run_id": run_id, "reward_rise": verdict.reward_rise,
                                                  "accuracy_change": verdict.accuracy_change,
                                                  "accuracy_stderr": verdict.accuracy_stderr}))
