"""A code location for the daemon test (``test_checkpoint_daemon.py``): the project's definitions from the
config file ``$AERORL_TEST_ROOT/bench.toml``, their resources under ``$AERORL_TEST_ROOT`` and the session's
models folder ``$AERORL_TEST_MODELS``, so the daemon's runs write nothing into the checkout."""

from __future__ import annotations

import os
from pathlib import Path

from dagster_duckdb import DuckDBResource

from aerorl_pipeline.definitions import build_definitions
from assets.io_managers import ParquetTableIOManager
from assets.resources import ModelRuntime

ROOT = Path(os.environ["AERORL_TEST_ROOT"])

defs = build_definitions(ROOT / "bench.toml", {
    "model_runtime": ModelRuntime(models_dir=os.environ["AERORL_TEST_MODELS"], device="cpu", torch_threads=1),
    "duckdb": DuckDBResource(database=str(ROOT / "aerorl.duckdb")),
    "io_manager": ParquetTableIOManager(base_dir=str(ROOT / "cache")),
})
