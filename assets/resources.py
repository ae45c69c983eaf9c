"""Typed resources: the model runtime (device, threads, model cache) and the report database."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import torch
from dagster_duckdb import DuckDBResource

from aerorl_ops.config.scale_out import StorageSettings
from aerorl_ops.models.build_progress import BUILD_LOG
from aerorl_ops.models.entry import ModelEntry
from aerorl_ops.models.loading import LoadedVLM, load_vlm, resolve_device
from aerorl_ops.models.sources import TORCH_DTYPES, model_source
from aerorl_ops.rl.run.embedded_builds import EMBEDDED_BUILDERS
from assets.io_managers import ParquetTableIOManager
from assets.project import DATA_DIR, DUCKDB_PATH, MODELS_DIR


class ModelRuntime(dg.ConfigurableResource):
    """How models are loaded and run.

    device: "auto" (CUDA when visible, else CPU), "cpu" or "cuda[:N]".
    torch_threads: torch intra-op threads; 0 keeps torch's default. Set 1 when several
        partitions run at once on a small machine, so their threads do not thrash.
    local_files_only: never reach for a model hub (the default: nightly runs are offline).
    models_dir: where embedded models are built.
    telemetry_interval_s: how often GPU/process telemetry is sampled during generation.
    """

    device: str = "auto"
    torch_threads: int = 0
    local_files_only: bool = True
    models_dir: str = str(MODELS_DIR)
    telemetry_interval_s: float = 0.2

    def torch_device(self) -> torch.device:
        return resolve_device(self.device)

    def apply_threads(self) -> None:
        if self.torch_threads > 0:
            torch.set_num_threads(self.torch_threads)

    def load(self, entry: ModelEntry) -> LoadedVLM:
        self.apply_threads()
        with build_lines_in_run_log():  # a first use builds an embedded model: its progress reaches the step's log
            source = model_source(entry, Path(self.models_dir), self.local_files_only, EMBEDDED_BUILDERS)
        return load_vlm(source, self.torch_device(), TORCH_DTYPES[entry.dtype])


class _ToDagsterLog(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        dg.get_dagster_logger("model_build").info(record.getMessage())


@contextmanager
def build_lines_in_run_log() -> Iterator[None]:
    """While it lasts, the library's model-build lines (``aerorl_ops.models.build_progress``) go to the
    Dagster log of the step that runs it."""
    handler = _ToDagsterLog()
    level = BUILD_LOG.level
    BUILD_LOG.addHandler(handler)
    BUILD_LOG.setLevel(logging.INFO)
    try:
        yield
    finally:
        BUILD_LOG.removeHandler(handler)
        BUILD_LOG.setLevel(level)


def default_resources(storage: StorageSettings | None = None) -> dict[str, object]:
    """The resources of this checkout: models under ``data/models``, the report in ``reports/aerorl.duckdb``
    and the partitions' Parquet where ``storage`` (the config file's ``[storage]``) says."""
    storage = storage or StorageSettings()
    return {
        "model_runtime": ModelRuntime(),
        "duckdb": DuckDBResource(database=str(DUCKDB_PATH)),
        "io_manager": ParquetTableIOManager(base_dir=storage.cache_url or str(DATA_DIR / "cache"),
                                           storage_options=storage.storage_options),
    }
