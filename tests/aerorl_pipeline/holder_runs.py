"""A Dagster run in a process of its own whose one step holds on for 10 minutes (a test kills it): optionally a
step of a pool, so that it holds the pool's slot."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HOLDER = """
import time
import dagster as dg

@dg.op(pool={pool!r})
def hold() -> None:
    time.sleep(600)

@dg.job(tags={{"holder": {name!r}}})
def holding() -> None:
    hold()

holding.execute_in_process(instance=dg.DagsterInstance.get())
"""


def start_holder(name: str, home: Path, pool: str | None = None) -> subprocess.Popen:
    """The holder run tagged ``holder: name`` on the Dagster home ``home``, its step in ``pool`` when given."""
    return subprocess.Popen([sys.executable, "-c", HOLDER.format(name=name, pool=pool)],
                            env={**os.environ, "DAGSTER_HOME": str(home)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
