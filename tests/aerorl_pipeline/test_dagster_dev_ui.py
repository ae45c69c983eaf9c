"""`dagster dev` serves the code location: assets, jobs, the schedule and the asset checks, read
back through the webserver's GraphQL API, then every process it started is shut down.

The server is started by ``scripts/screenshot_ui.py``'s ``dagster_dev`` (a fresh DAGSTER_HOME
under tmp, a free loopback port, its own process group).
"""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "screenshot_ui.py"

ASSETS = {"docvqa_rows", "chartqa_rows", "easy_vqa_rows", "arc_rows", "generations", "reward_scores",
          "benchmark_report", "rl_run", "checkpoints", "eval_run", "checkpoint_eval", "training/train_rows",
          "training/held_out_rows", "training/validation_rows", "evaluation/eval_rows"}
CHECKS = {
    ("generations", "no_prompt_echo", True),
    ("generations", "valid_latencies", False),
    ("reward_scores", "no_nan_scores", True),
    ("reward_scores", "one_score_per_sample", True),
    ("benchmark_report", "no_metric_drop", False),
    ("benchmark_report", "no_row_drop", True),
    ("benchmark_report", "library_canary", False),
    ("benchmark_report", "batch_invariant", False),
    ("rl_run", "no_reward_hacking", False),
}

DEFINITIONS_QUERY = """
query {
  repositoriesOrError { ... on RepositoryConnection { nodes {
    name location { name }
    jobs { name }
    schedules { name cronSchedule scheduleState { status } }
    sensors { name sensorState { status } }
  } } }
  assetNodes {
    assetKey { path }
    groupName
    assetChecksOrError { ... on AssetChecks { checks { name blocking jobNames partitionDefinition { type } } } }
  }
}
"""


@pytest.fixture(scope="module")
def ui():
    """``scripts/screenshot_ui.py`` as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("screenshot_ui", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses resolve annotations through sys.modules
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


@pytest.mark.slow
def test_dagster_dev_lists_the_definitions_and_shuts_down_cleanly(ui, tmp_path):
    with ui.dagster_dev(tmp_path / "dagster_home") as server:
        data = ui.graphql(server.url, DEFINITIONS_QUERY)
        assert ui.graphql(server.url, ui.SET_NUX_SEEN) == {"setNuxSeen": True}
        process = server.process
        pgid = process.pid

    (repository,) = data["repositoriesOrError"]["nodes"]
    assert repository["location"]["name"] == ui.LOCATION_NAME
    assert {job["name"] for job in repository["jobs"]} - {"__ASSET_JOB"} == {"benchmark", "training", "evaluation",
                                                                            "checkpoint_evaluation"}
    sensors = {s["name"]: s["sensorState"]["status"] for s in repository["sensors"]}
    assert sensors["checkpoint_evaluations"] == "STOPPED"  # off until a user turns it on
    assert sensors["automation_conditions"] == "RUNNING"  # the rows' 01:00 refresh happens by default
    (schedule,) = repository["schedules"]
    assert (schedule["name"], schedule["cronSchedule"], schedule["scheduleState"]["status"]) == (
        "nightly_benchmark", "0 2 * * *", "RUNNING")

    nodes = {"/".join(node["assetKey"]["path"]): node for node in data["assetNodes"]}
    assert set(nodes) == ASSETS
    assert nodes["generations"]["groupName"] == "benchmark"
    checks = {(asset, check["name"], check["blocking"])
              for asset, node in nodes.items() for check in node["assetChecksOrError"].get("checks", [])}
    assert checks == CHECKS
    for asset, node in nodes.items():
        for check in node["assetChecksOrError"].get("checks", []):
            if asset == "rl_run":  # the reward-hacking guard runs with the (unpartitioned) training job
                assert "training" in check["jobNames"] and check["partitionDefinition"] is None, check
                continue
            assert "benchmark" in check["jobNames"], check["name"]  # they run with the partition
            assert check["partitionDefinition"]["type"] == "MULTIPARTITIONED"

    assert process.returncode is not None
    assert ui._live_members(pgid) == []  # webserver, daemon and code server are gone too


def test_a_child_that_inherited_ignored_sigint_still_stops(ui):
    """A shell's background job starts with SIGINT ignored; the launcher restores the default."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # what `cmd &` in a script does to us
    try:
        process = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
                                   start_new_session=True, preexec_fn=ui._default_signals, stdout=subprocess.PIPE)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert process.stdout.readline() == b"ready\n"  # interpreter started: SIGINT now meets its own handler
    assert ui.stop_group(process, grace_s=10) == ["SIGINT"]
    assert process.returncode == -signal.SIGINT
