"""The ``aerorl`` command (and so the code location, through ``aerorl_pipeline``) starts torch with
OpenMP's idle threads asleep and one thread per CPU it may use, unless the user said otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = "import aerorl_pipeline.cli, os, torch; print(os.environ['OMP_WAIT_POLICY'], torch.get_num_threads())"


def probe(**variables: str) -> str:
    """What a fresh interpreter that imports the CLI, then torch, prints: its wait policy and thread count."""
    environ = {name: value for name, value in os.environ.items() if name not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env={**environ, **variables},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity on this platform")
def test_unset_the_policy_is_passive_and_the_threads_are_the_cpus_it_may_use():
    assert probe() == f"PASSIVE {len(os.sched_getaffinity(0))}"


@pytest.mark.slow
def test_a_users_settings_are_kept():
    assert probe(OMP_WAIT_POLICY="ACTIVE", OMP_NUM_THREADS="1") == "ACTIVE 1"
