"""The persistent local Dagster instance the command line uses (and `dagster dev` shows)."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from assets.project import PROJECT_ROOT

DEFAULT_DAGSTER_HOME = PROJECT_ROOT / ".dagster_home"


def ensure_dagster_home() -> Path:
    """Use ``$DAGSTER_HOME`` when set, else the project's ``.dagster_home`` (created if needed)."""
    home = Path(os.environ.get("DAGSTER_HOME") or DEFAULT_DAGSTER_HOME)
    home.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def local_instance() -> dg.DagsterInstance:
    ensure_dagster_home()
    return dg.DagsterInstance.get()
