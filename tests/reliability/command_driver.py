"""Run one `aerorl` command in a process of its own against isolated folders (used by the reliability tests).

Everything the command writes lands under ``--root``, as ``tests/conftest.py::make_dagster_env`` lays it
out (``aerorl.duckdb``, ``cache/``), with embedded models in ``--models-dir`` and checkpoints beside it;
the Dagster instance is ``$DAGSTER_HOME``. The process exits with the command's code, so a test can
signal it, run two at once, and read what each printed.

    python tests/reliability/command_driver.py --root R --models-dir M -- train --run-name r …

``--hold-at-checkpoint step-6`` makes a training command wait, once that checkpoint is written, until a
signal asks it to stop: a test that signals it there knows the signal lands mid-run, however fast the
remaining steps would have been (they took half a second, and CI's poll sometimes came after the end).
``--hold-in-report`` makes a benchmark's ``benchmark_report`` step wait (at most HOLD_S) before it writes,
holding the ``duckdb_writer`` pool slot, so a test can kill it there or make another command wait for it.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path
from types import ModuleType

HOLD_S = 300.0


def _tests_conftest() -> ModuleType:
    """``tests/conftest.py``, loaded by its path (``tests/reliability`` has a conftest of its own)."""
    spec = importlib.util.spec_from_file_location("tests_conftest", Path(__file__).resolve().parents[1] / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def hold_at_checkpoint(name: str) -> None:
    """Once the checkpoint folder ``name`` is saved, wait (at most HOLD_S) for a stop to be requested."""
    from aerorl_ops import stop
    from aerorl_ops.rl.runtime import sharding

    save = sharding.save_checkpoint

    def save_then_hold(directory, *args, **kwargs):
        saved = save(directory, *args, **kwargs)
        deadline = time.monotonic() + HOLD_S
        while Path(directory).name == name and stop.stop_requested() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        return saved

    sharding.save_checkpoint = save_then_hold


def hold_in_report() -> None:
    """``benchmark_report`` waits (at most HOLD_S) before it writes, its pool slot held, until a stop is requested."""
    import assets.benchmark.reports as reports
    from aerorl_ops import stop

    write = reports.write_report

    def hold_then_write(*args, **kwargs):
        deadline = time.monotonic() + HOLD_S
        while stop.stop_requested() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        return write(*args, **kwargs)

    reports.write_report = hold_then_write


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--models-dir", type=Path, required=True)
    parser.add_argument("--hold-at-checkpoint", default=None)
    parser.add_argument("--hold-in-report", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.hold_at_checkpoint:
        hold_at_checkpoint(args.hold_at_checkpoint)
    if args.hold_in_report:
        hold_in_report()
    fixtures = _tests_conftest()
    fixtures.point_commands_at(fixtures.make_dagster_env(args.root, args.models_dir), args.models_dir,
                               Path(os.environ["DAGSTER_HOME"]))
    from aerorl_pipeline.cli import main as aerorl

    return aerorl(args.command[1:] if args.command[:1] == ["--"] else args.command)


if __name__ == "__main__":
    sys.exit(main())
