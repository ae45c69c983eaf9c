"""Run one `aerorl` command in a process of its own against isolated folders (used by the reliability tests).

Everything the command writes lands under ``--root``, as ``tests/conftest.py::make_dagster_env`` lays it
out (``aerorl.duckdb``, ``cache/``), with embedded models in ``--models-dir`` and checkpoints beside it;
the Dagster instance is ``$DAGSTER_HOME``. The process exits with the command's code, so a test can
signal it, run two at once, and read what each printed.

    python tests/reliability/command_driver.py --root R --models-dir M -- train --run-name r …
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType


def _tests_conftest() -> ModuleType:
    """``tests/conftest.py``, loaded by its path (``tests/reliability`` has a conftest of its own)."""
    spec = importlib.util.spec_from_file_location("tests_conftest", Path(__file__).resolve().parents[1] / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--models-dir", type=Path, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    fixtures = _tests_conftest()
    fixtures.point_commands_at(fixtures.make_dagster_env(args.root, args.models_dir), args.models_dir,
                               Path(os.environ["DAGSTER_HOME"]))
    from aerorl_pipeline.cli import main as aerorl

    return aerorl(args.command[1:] if args.command[:1] == ["--"] else args.command)


if __name__ == "__main__":
    sys.exit(main())
