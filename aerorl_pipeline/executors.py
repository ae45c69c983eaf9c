"""The ``benchmark`` job's executor, chosen by the config file's ``[executor]`` table.

- ``default``: none set here, so Dagster's own applies (in-process for ``aerorl bench``,
  multiprocess for runs launched from ``dagster dev``).
- ``celery``: dagster-celery's executor. Partition steps go to the ``dagster`` queue, served by any
  number of ``aerorl worker`` processes on any machines; steps that write the DuckDB report (the
  rows assets' rejections, ``benchmark_report``) go to the ``duckdb_writer`` queue, which exactly one
  ``aerorl worker --queue duckdb_writer`` serves, on the machine that holds the database. With no
  ``celery_broker``, a folder broker under ``celery_dir`` serves workers on this machine.
- ``k8s``: dagster-k8s's ``k8s_job_executor``: each step is a Kubernetes job in ``k8s_namespace`` from
  ``k8s_image``; the GPU request of a partition's generation step is its ``dagster-k8s/config`` op tag.

The engines are the optional extra ``pip install -e .[distributed]``; they are imported only when a
config asks for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg

from aerorl_ops.config.scale_out import ExecutorSettings
from assets.project import DATA_DIR

INSTALL_HINT = "install the scale-out extra: pip install -e '.[distributed]'"


class MissingEngineError(ImportError):
    """The config asks for an executor whose package is not installed."""


@dataclass(frozen=True)
class CeleryApp:
    """The Celery app the executor submits to and the workers serve (they must agree)."""

    broker: str
    backend: str
    config_source: dict[str, Any] = field(default_factory=dict)
    folder: Path | None = None  # the folder broker's folder; None with a network broker

    @property
    def is_local(self) -> bool:
        return self.folder is not None


def default_backend(broker: str) -> str:
    """Results through the broker itself: RabbitMQ's RPC replies, or the same Redis."""
    return "rpc://" if broker.startswith(("amqp://", "pyamqp://")) else broker


def celery_app(settings: ExecutorSettings, data_dir: Path = DATA_DIR) -> CeleryApp:
    """The app of ``settings``: its broker (or a folder broker), backend and worker settings.

    Each worker takes one step at a time and acknowledges it when it ends (``acks_late``), so a
    worker that dies mid-step leaves no step half-claimed by a live worker."""
    common = {"worker_prefetch_multiplier": 1, "task_acks_late": True, "task_reject_on_worker_lost": False}
    if settings.celery_broker:
        return CeleryApp(settings.celery_broker, settings.celery_backend or default_backend(settings.celery_broker),
                         common)
    from aerorl_pipeline.folder_broker import TRANSPORT

    folder = Path(settings.celery_dir).expanduser() if settings.celery_dir else data_dir / "celery"
    folder = folder.resolve()
    transport = {"data_folder_in": str(folder / "queue"), "data_folder_out": str(folder / "queue"),
                 "processed_folder": str(folder / "processed"), "control_folder": str(folder / "control"),
                 "store_processed": False, "polling_interval": 0.2}
    return CeleryApp("filesystem://", settings.celery_backend or f"file://{folder / 'results'}",
                     {**common, "broker_transport": TRANSPORT, "broker_transport_options": transport}, folder)


def prepare_folders(app: CeleryApp) -> None:
    """Create the folder broker's folders (kombu does not)."""
    if app.folder is not None:
        for name in ("queue", "processed", "control", "results"):
            (app.folder / name).mkdir(parents=True, exist_ok=True)


def celery_executor_def(app: CeleryApp) -> dg.ExecutorDefinition:
    try:
        from dagster_celery import celery_executor
    except ImportError as error:
        raise MissingEngineError(f"[executor] kind = \"celery\" needs dagster-celery; {INSTALL_HINT}") from error
    prepare_folders(app)
    return celery_executor.configured({"broker": app.broker, "backend": app.backend,
                                       "config_source": app.config_source}, name="celery")


def k8s_executor_def(settings: ExecutorSettings) -> dg.ExecutorDefinition:
    try:
        from dagster_k8s import k8s_job_executor
    except ImportError as error:
        raise MissingEngineError(f"[executor] kind = \"k8s\" needs dagster-k8s; {INSTALL_HINT}") from error
    return k8s_job_executor.configured({"job_namespace": settings.k8s_namespace, "job_image": settings.k8s_image},
                                       name="k8s")


def benchmark_executor(settings: ExecutorSettings, data_dir: Path = DATA_DIR) -> dg.ExecutorDefinition | None:
    """The executor of the ``benchmark`` job; None keeps Dagster's default."""
    if settings.kind == "celery":
        return celery_executor_def(celery_app(settings, data_dir))
    if settings.kind == "k8s":
        return k8s_executor_def(settings)
    return None
