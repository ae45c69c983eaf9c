"""Several torchrun nodes on this machine (``assets.training.local_nodes``): two agents with ``--nnodes 2``
of one rank each, meeting at a c10d rendezvous on localhost, train what one agent of two ranks trains;
a rank that fails on node 1 stops the other node at once and is named in one line."""

from __future__ import annotations

import doctest
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from assets.training import local_nodes, rank_failures
from assets.training.rank_failures import failure_line, first_failure, root_cause
from assets.training.torchrun import LOCAL_NODES_MODULE, local_nodes_command, torchrun_command
from tests.assets.training.failing_node_worker import ERROR, SLEEP_S

PARITY_WORKER = "tests.assets.training.nodes_parity_worker"
FAILING_WORKER = "tests.assets.training.failing_node_worker"
ONE_THREAD = {"OMP_NUM_THREADS": "1"}  # two ranks on this 2-core machine, whichever the launch


def run(command: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    return subprocess.run(command, env={**os.environ, **ONE_THREAD}, timeout=timeout_s, capture_output=True,
                          text=True, check=False)


def test_the_local_launch_is_one_torchrun_agent_per_node_at_a_c10d_rendezvous():
    assert local_nodes_command(2, 3, "run-1", Path("/tmp/f"), "pkg.worker") == [
        sys.executable, "-m", LOCAL_NODES_MODULE, "--nnodes", "2", "--nproc-per-node", "3", "--rdzv-id", "run-1",
        "--failures", "/tmp/f", "-m", "pkg.worker"]
    agent = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "3",
             "--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:29400", "--rdzv-id", "run-1", "--rdzv-conf"]
    assert local_nodes.agent_commands(2, 3, 29400, "run-1", ["-m", "pkg.worker", "x"]) == [
        [*agent, "is_host=true", "-m", "pkg.worker", "x"],  # node 0's agent hosts the rendezvous store
        [*agent, "is_host=false", "-m", "pkg.worker", "x"]]


def test_the_failure_line_examples_hold():
    assert doctest.testmod(rank_failures).failed == 0


def test_the_root_cause_is_the_earliest_rank_and_a_node_only_where_no_rank_wrote(tmp_path: Path):
    node = {"node": 0, "time": 1.0, "error": "its torchrun agent exited with code 1"}
    late, early = ({"rank": r, "node": r, "time": t, "error": f"E{r}"} for r, t in ((0, 5.0), (1, 3.0)))
    assert root_cause([node, late, early]) == early and root_cause([node]) == node and root_cause([]) is None
    (tmp_path / "rank-0.json").write_text(json.dumps(late))
    (tmp_path / "node-1.json").write_text(json.dumps(node))
    assert first_failure(tmp_path) == late
    assert failure_line(late, world_size=4, nnodes=2) == "training rank 0 of 4 (node 0 of 2) failed: E0"


@pytest.mark.slow
def test_two_agents_of_one_rank_train_what_one_agent_of_two_ranks_trains(tiny_model_dir, tmp_path: Path):
    """About 25 s on 2 idle cores (up to 50 s on busy ones): each launch starts its agents and ranks, then trains."""
    nodes, node = tmp_path / "nodes.pt", tmp_path / "node.pt"
    worker = ["-m", PARITY_WORKER, str(tiny_model_dir)]
    two_agents = run([sys.executable, "-m", LOCAL_NODES_MODULE, "--nnodes", "2", "--nproc-per-node", "1",
                      "--rdzv-id", "parity", *worker, str(nodes)], timeout_s=240)
    assert two_agents.returncode == 0, two_agents.stderr[-3000:]
    one_agent = run([*torchrun_command(2, PARITY_WORKER), str(tiny_model_dir), str(node)], timeout_s=240)
    assert one_agent.returncode == 0, one_agent.stderr[-3000:]
    apart, together = torch.load(nodes, weights_only=False), torch.load(node, weights_only=False)
    assert apart["world_size"] == together["world_size"] == 2
    moved = max(float((together["end"][n] - together["start"][n]).abs().max()) for n in together["start"])
    assert moved > 1e-3  # the steps trained
    assert apart["end"].keys() == together["end"].keys()
    differences = {n: float((apart["end"][n] - together["end"][n]).abs().max()) for n in together["end"]}
    assert max(differences.values()) < 1e-6, sorted(differences.items(), key=lambda item: -item[1])[:3]
    assert [s.phase for s in apart["steps"]] == ["warmup", "grpo", "grpo"]
    for a, b in zip(apart["steps"], together["steps"], strict=True):
        assert (a.step, a.phase, a.reward_mean, a.accuracy) == (b.step, b.phase, b.reward_mean, b.accuracy)
        assert a.loss == pytest.approx(b.loss, rel=1e-6, abs=1e-7)
        assert a.grad_norm == pytest.approx(b.grad_norm, rel=1e-6)
        assert (a.kl is None) == (b.kl is None) and (a.kl is None or a.kl == pytest.approx(b.kl, rel=1e-6, abs=1e-9))
    assert all(s.kl is not None for s in apart["steps"][1:])  # the RL steps measured their KL


@pytest.mark.slow
def test_a_rank_that_fails_on_node_1_stops_node_0_and_is_named(tmp_path: Path):
    """About 4 s: rank 0 sleeps in no collective, so only the launcher stopping its agent ends it early."""
    started = time.monotonic()
    launched = run([*local_nodes_command(2, 1, "failing", tmp_path, FAILING_WORKER), str(tmp_path)],
                   timeout_s=SLEEP_S + 60)
    assert time.monotonic() - started < SLEEP_S / 2  # node 0 was stopped, not waited for
    assert launched.returncode != 0
    assert failure_line(first_failure(tmp_path), world_size=2, nnodes=2) == (
        f"training rank 1 of 2 (node 1 of 2) failed: RuntimeError: {ERROR}")
    (agent,) = tmp_path.glob("node-*.json")  # the launcher's record of the agent it saw fail: rank 1's
    assert json.loads(agent.read_text())["error"].startswith("its torchrun agent exited with code ")
