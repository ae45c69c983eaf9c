"""``rl_run`` with ``nnodes = 2`` nodes of one rank each on this machine (``[training_launch] launcher =
"local"``): two torchrun agents at a c10d rendezvous, launched through Dagster Pipes. Rank 0 reports the
steps and evaluations and writes the run's rows once; a rank on node 1 that fails fails the step with
one line naming it and its node, without waiting for the collective timeout. 20-35 s each on 2 cores."""

from __future__ import annotations

import shutil
import time
import uuid

import duckdb
import pytest

import assets.training.torchrun as torchrun
from tests.assets.training.crashing_worker import CRASH
from tests.assets.training.run_helpers import rl_run_materialization, run_checkpoints
from tests.assets.training.test_rl_run_torchrun import TIMEOUT_S, run_job

pytestmark = pytest.mark.filterwarnings("ignore:Function `PipesMessageReader.expected_writer_count`")

NODES = {"nproc_per_node": 1, "nnodes": 2}


@pytest.mark.slow
def test_two_nodes_report_their_steps_and_rank_0_writes_the_rows_once(dagster_env):
    run_name = f"test-{uuid.uuid4().hex[:8]}"
    try:
        result = run_job(dagster_env, run_name, **NODES)
        assert result.success
        with duckdb.connect(str(dagster_env.duckdb_path), read_only=True) as conn:
            steps = conn.execute("SELECT step, phase FROM training_steps WHERE run_id = ? ORDER BY step",
                                 [run_name]).fetchall()
            runs = conn.execute("SELECT count(*) FROM training_runs WHERE run_id = ?", [run_name]).fetchone()
    finally:
        shutil.rmtree(run_checkpoints(dagster_env, run_name), ignore_errors=True)
    assert steps == [(1, "warmup"), (2, "grpo"), (3, "grpo")] and runs == (1,)  # one row per step, not per rank
    metadata = rl_run_materialization(result).metadata
    assert (metadata["nnodes"].value, metadata["nproc_per_node"].value, metadata["reported_evals"].value) == (2, 1, 5)
    reported = metadata["reported_steps"].value.splitlines()[2:]  # the markdown table's rows
    assert [tuple(cell.strip() for cell in row.split("|")[1:3]) for row in reported] == [
        ("1", "warmup"), ("2", "grpo"), ("3", "grpo")]


@pytest.mark.slow
def test_a_rank_that_fails_on_node_1_fails_the_step_naming_it_and_its_node(dagster_env, monkeypatch):
    monkeypatch.setattr(torchrun, "WORKER_MODULE", "tests.assets.training.crashing_worker")
    run_name = f"test-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    try:
        result = run_job(dagster_env, run_name, **NODES)
    finally:
        shutil.rmtree(run_checkpoints(dagster_env, run_name), ignore_errors=True)
    assert time.monotonic() - started < TIMEOUT_S  # node 0 was stopped: nobody waited for a collective
    assert not result.success
    failure = result.failure_data_for_node("rl_run")
    assert failure.user_failure_data.description == f"training rank 1 of 2 (node 1 of 2) failed: RuntimeError: {CRASH}"
    assert "crashing_rl_step" in failure.user_failure_data.metadata["traceback"].value
