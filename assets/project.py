"""Where this checkout keeps its config, cached data and reports (defaults for the resources and
for every command's ``--config``)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from aerorl_ops.config.benchmark import BenchmarkConfig, load_benchmark_config
from aerorl_ops.config.dataset_kinds import check_datasets
from aerorl_ops.envs.registry import dataset_kinds

PROJECT_ROOT = Path(__file__).resolve().parents[1]
BENCHMARK_CONFIG_PATH = PROJECT_ROOT / "config" / "benchmark.toml"
CONFIG_ENV = "AERORL_CONFIG"
"""Names another config file for ``dagster dev``; read only when the definitions load."""
DATA_DIR = PROJECT_ROOT / "data"
MODELS_DIR = DATA_DIR / "models"
"""Embedded models are built here; training checkpoints go beside it (``data/checkpoints``)."""
REPORTS_DIR = PROJECT_ROOT / "reports"
DUCKDB_PATH = REPORTS_DIR / "aerorl.duckdb"


def load_config(path: Path) -> BenchmarkConfig:
    """How the project reads a config file: ``load_benchmark_config``, then every ``[datasets.<name>]``
    table checked against the environment registry's kinds (``check_datasets``)."""
    return check_datasets(load_benchmark_config(path), dataset_kinds())


@cache
def benchmark_config(path: Path = BENCHMARK_CONFIG_PATH) -> BenchmarkConfig:
    """The benchmark config at ``path`` (the shipped one by default), read once per process."""
    return load_config(path)
