"""Where this checkout keeps its config, cached data and reports (defaults for the resources)."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
BENCHMARK_CONFIG_PATH = PROJECT_ROOT / "config" / "benchmark.toml"
DATA_DIR = PROJECT_ROOT / "data"
REPORTS_DIR = PROJECT_ROOT / "reports"
DUCKDB_PATH = REPORTS_DIR / "aerorl.duckdb"
