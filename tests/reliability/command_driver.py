"""Run one `aerorl` command in a process of its own against isolated folders (used by the reliability tests).

Everything the command writes lands under ``--root``, as ``tests/conftest.py::make_dagster_env`` lays it
out (``aerorl.duckdb``, ``cache/``), with embedded models in ``--models-dir`` and checkpoints beside it;
the Dagster instance is ``$DAGSTER_HOME``. The process exits with the command's code, so a test can
signal it, run two at once, and read what each printed.

    python tests/reliability/command_driver.py --root R --models-dir M -- train --run-name r …
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def isolate(root: Path, models_dir: Path) -> None:
    """Point the project's paths and resources at ``root`` and ``models_dir``."""
    from dagster_duckdb import DuckDBResource

    import aerorl_pipeline.definitions as definitions
    import assets.project as project
    import assets.resources
    from assets.io_managers import ParquetTableIOManager
    from assets.resources import ModelRuntime

    resources = {
        "model_runtime": ModelRuntime(models_dir=str(models_dir), device="cpu", torch_threads=1,
                                      telemetry_interval_s=0.05),
        "duckdb": DuckDBResource(database=str(root / "aerorl.duckdb")),
        "io_manager": ParquetTableIOManager(base_dir=str(root / "cache")),
    }
    definitions.default_resources = assets.resources.default_resources = lambda storage=None: dict(resources)
    project.MODELS_DIR, project.DUCKDB_PATH = models_dir, root / "aerorl.duckdb"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--models-dir", type=Path, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    args.root.mkdir(parents=True, exist_ok=True)
    isolate(args.root, args.models_dir)
    from aerorl_pipeline.cli import main as aerorl

    return aerorl(args.command[1:] if args.command[:1] == ["--"] else args.command)


if __name__ == "__main__":
    sys.exit(main())
