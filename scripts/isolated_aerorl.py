"""`aerorl` with everything it writes under one folder: a chaos run's or a measurement's, never the checkout's.

    python scripts/isolated_aerorl.py --workdir W -- train --run-name r …

The checkout's paths (``assets.project``: the Parquet cache and built models under ``data/``, checkpoints beside
them, the report database, TensorBoard files and plots under ``reports/``) become ``W/data`` and ``W/reports``,
and the Dagster instance is ``W/dagster_home`` (``$DAGSTER_HOME``). They are set before any module reads them,
so the resources' defaults and every process the command starts (a Celery worker gets the report database and
models folder with each step) follow. The command's exit code is this process's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def isolate(workdir: Path) -> None:
    """Point this process's `aerorl` at ``workdir`` (see the module docstring); call before importing it."""
    sys.path.insert(0, str(ROOT))
    import aerorl_pipeline  # noqa: F401  (first: it sets torch's OpenMP defaults before anything loads torch)
    from aerorl_ops.quiet import quiet_known_logs

    quiet_known_logs()  # as `aerorl` does first: assets.project's imports load bitsandbytes, which logs as it loads
    import assets.project as project

    workdir = workdir.resolve()
    project.DATA_DIR = workdir / "data"
    project.MODELS_DIR = project.DATA_DIR / "models"
    project.REPORTS_DIR = workdir / "reports"
    project.DUCKDB_PATH = project.REPORTS_DIR / "aerorl.duckdb"
    project.REPORTS_DIR.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSTER_HOME"] = str(workdir / "dagster_home")


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] != "--workdir" or argv[2] != "--":
        print("usage: isolated_aerorl.py --workdir FOLDER -- <aerorl arguments>", file=sys.stderr)
        return 2
    isolate(Path(argv[1]))
    from aerorl_pipeline.cli import main as aerorl

    return aerorl(argv[3:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
