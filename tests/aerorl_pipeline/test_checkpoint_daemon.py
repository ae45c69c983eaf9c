"""End to end: ``dagster-daemon`` runs the ``checkpoint_evaluations`` sensor against a real tiny training
run, and the evaluation of its final checkpoint lands in DuckDB with its lineage.

The training run executes on a persistent instance (a fresh DAGSTER_HOME under tmp); ``dagster sensor
start`` turns the sensor on (it is off by default); the daemon, in its own process group, ticks it, the
run it requests executes the ``checkpoint_evaluation`` job, and the daemon (with every process it started)
is stopped. The code location is ``daemon_location.py``: everything it writes is under tmp.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from tests.assets.evaluation.test_checkpoint_eval import CONFIG, RUN

PROJECT_ROOT = Path(__file__).resolve().parents[2]
LOCATION = Path(__file__).with_name("daemon_location.py")
TIMEOUT_S = 240


def _screenshot_ui():
    spec = importlib.util.spec_from_file_location("screenshot_ui_daemon", PROJECT_ROOT / "scripts" / "screenshot_ui.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_daemon_evaluates_a_new_checkpoint_and_the_eval_lands_with_its_lineage(tmp_path, models_dir,
                                                                                   tiny_model_dir, monkeypatch):
    home, root = tmp_path / "dagster_home", tmp_path / "location"
    home.mkdir()
    root.mkdir()
    shutil.copy(PROJECT_ROOT / ".dagster_home" / "dagster.yaml", home / "dagster.yaml")
    (root / "bench.toml").write_text(CONFIG.replace('follow_checkpoints = "all"', 'follow_checkpoints = "final"'))
    workspace = tmp_path / "workspace.yaml"
    workspace.write_text(f"load_from:\n  - python_file:\n      relative_path: {LOCATION}\n"
                         f"      working_directory: {PROJECT_ROOT}\n      location_name: daemon_test\n")
    env = {**os.environ, "DAGSTER_HOME": str(home), "AERORL_TEST_ROOT": str(root),
           "AERORL_TEST_MODELS": str(models_dir), "PYTHONUNBUFFERED": "1"}
    for name in ("DAGSTER_HOME", "AERORL_TEST_ROOT", "AERORL_TEST_MODELS"):
        monkeypatch.setenv(name, env[name])

    spec = importlib.util.spec_from_file_location("daemon_location", LOCATION)
    location = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(location)
    run = f"daemon-{uuid.uuid4().hex[:8]}"
    with dg.DagsterInstance.from_config(str(home)) as instance:
        trained = location.defs.resolve_job_def("training").execute_in_process(
            instance=instance, run_config={"ops": {"rl_run": {"config": {**RUN, "run_name": run}}}})
        assert trained.success
    subprocess.run([sys.executable, "-m", "dagster", "sensor", "start", "checkpoint_evaluations", "-w",
                    str(workspace)], cwd=PROJECT_ROOT, env=env, check=True, capture_output=True, timeout=120)

    ui = _screenshot_ui()
    log_path = tmp_path / "daemon.log"
    with open(log_path, "wb") as log:
        daemon = subprocess.Popen([sys.executable, "-m", "dagster._daemon", "run", "-w", str(workspace)],
                                  cwd=PROJECT_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            deadline, runs = time.monotonic() + TIMEOUT_S, []
            while time.monotonic() < deadline:
                runs = instance.get_runs(dg.RunsFilter(job_name="checkpoint_evaluation"))
                if runs and runs[0].is_finished:
                    break
                assert daemon.poll() is None, log_path.read_text()[-3000:]
                time.sleep(1.0)
            assert runs and runs[0].status == dg.DagsterRunStatus.SUCCESS, log_path.read_text()[-3000:]
            (evaluated,) = runs
            assert evaluated.tags["dagster/partition"] == f"{run}@3"
            assert evaluated.tags["dagster/sensor_name"] == "checkpoint_evaluations"
    finally:
        ui.stop_group(daemon, grace_s=20)
    assert ui._live_members(daemon.pid) == []  # the daemon and every process it started are gone

    with duckdb.connect(str(root / "aerorl.duckdb"), read_only=True) as conn:
        lineage = conn.execute("SELECT checkpoint, eval_id, dagster_run_id FROM checkpoint_evals").fetchall()
        (digest,) = conn.execute("SELECT content_sha256 FROM checkpoints WHERE run_id = ? AND final", [run]).fetchone()
        model = conn.execute("SELECT DISTINCT model, baseline FROM eval_vs_baseline WHERE eval_id = ?",
                             [lineage[0][1]]).fetchall()
    assert lineage == [(f"{run}@3", f"{run}@3/{digest[:12]}", evaluated.run_id)]  # "final": only the last one
    assert model == [(f"{run}@3", "tiny-qwen2-vl")]
