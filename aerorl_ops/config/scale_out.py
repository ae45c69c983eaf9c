"""Scale-out settings: where the benchmark's steps run (``[executor]``), where partitions write
their Parquet (``[storage]``) and where a training run's torchrun nodes start (``[training_launch]``).

The defaults keep everything on one machine: Dagster's own executor, and the Parquet cache under
``data/cache``. ``kind = "celery"`` sends each step of the ``benchmark`` job to Celery workers
(``aerorl worker``); ``kind = "k8s"`` runs each step as a Kubernetes job (``dagster-k8s``). Either
way the DuckDB report is written by one process only: steps that write it go to the
``duckdb_writer`` queue, which one worker serves (see docs/scaling-out.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aerorl_ops.config.fields import (
    fail,
    non_negative_int,
    non_negative_number,
    one_of,
    positive_int,
    setting,
    text_or_empty,
)

EXECUTOR_KINDS = ("default", "celery", "k8s")


any_text = text_or_empty("empty = the default")


def string_table(where: str, name: str, value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise fail(where, name, f"must be a table (e.g. {{ endpoint_url = \"http://…\" }}), got {value!r}")
    return dict(value)


@dataclass(frozen=True)
class ExecutorSettings:
    """Which engine executes the ``benchmark`` job's steps."""

    kind: str = setting("default", help="default (Dagster's in-process / multiprocess executor), celery "
                        "(dagster-celery workers) or k8s (a Kubernetes job per step, dagster-k8s)",
                        check=one_of(*EXECUTOR_KINDS))
    celery_broker: str = setting("", help="celery: broker URL (redis://host:6379/0, amqp://…); empty = a folder "
                                 "broker under celery_dir, for workers on this machine", check=any_text)
    celery_backend: str = setting("", help="celery: result backend URL; empty = files under celery_dir "
                                  "(with a folder broker) or the broker's own backend", check=any_text)
    celery_dir: str = setting("", help="celery: the folder broker's and file results' folder (empty = "
                              "data/celery)", check=any_text)
    workers: int = setting(2, help="celery: partition workers `aerorl bench` starts on this machine when it "
                           "uses the folder broker", check=positive_int)
    k8s_namespace: str = setting("default", help="k8s: namespace of the step jobs", check=any_text)
    k8s_image: str = setting("", help="k8s: image with this project installed (required with kind = \"k8s\")",
                             check=any_text)
    gpus_per_partition: int = setting(0, help="k8s: nvidia.com/gpu each partition's generation step requests",
                                      check=non_negative_int)
    pool_wait_limit_s: float = setting(0.0, help="how long a step of `aerorl bench`, `train` or `eval` waits for "
                                       "a pool slot (duckdb_writer) that a live run holds before the command ends "
                                       "with an error naming the holder; 0 = as long as the holder's process lives",
                                       check=non_negative_number)

    def __post_init__(self) -> None:
        if self.kind == "k8s" and not self.k8s_image:
            raise ValueError("[executor] kind = \"k8s\" needs k8s_image: an image with this project installed")


TRAINING_LAUNCHERS = ("local", "k8s")


@dataclass(frozen=True)
class TrainingLaunchSettings:
    """Where the torchrun nodes of a training run start when ``[training]`` asks for several ranks
    (``nnodes`` x ``nproc_per_node`` > 1); docs/scaling-out.md."""

    launcher: str = setting("local", help="local (one torchrun agent per node on this machine, a c10d rendezvous on "
                            "localhost) or k8s (one pod per node: rank 0's through dagster-k8s's Pipes client, the "
                            "others an indexed Job, found through a headless Service)",
                            check=one_of(*TRAINING_LAUNCHERS))
    namespace: str = setting("default", help="k8s: namespace of the node pods, their Job and Service", check=any_text)
    image: str = setting("", help="k8s: image with this project installed at the same path as the Dagster step's "
                         "(required with launcher = \"k8s\")", check=any_text)
    cpu: str = setting("", help="k8s: CPU request and limit of each node pod (e.g. \"8\"; empty = none)",
                       check=any_text)
    memory: str = setting("", help="k8s: memory request and limit of each node pod (e.g. \"64Gi\"; empty = none)",
                          check=any_text)
    gpus: int = setting(0, help="k8s: nvidia.com/gpu request and limit of each node pod (one per rank: "
                        "nproc_per_node)", check=non_negative_int)
    volume_claim: str = setting("", help="k8s: a ReadWriteMany PersistentVolumeClaim mounted at the project's data/ "
                                "and reports/ in every node pod (checkpoints, the report database); the Dagster step "
                                "must mount it there too; empty = none", check=any_text)
    port: int = setting(29500, help="k8s: the port node 0's torchrun agent serves the rendezvous on",
                        check=positive_int)

    def __post_init__(self) -> None:
        if self.launcher == "k8s" and not self.image:
            raise ValueError("[training_launch] launcher = \"k8s\" needs image: an image with this project installed")


@dataclass(frozen=True)
class StorageSettings:
    """Where the partitions' Parquet outputs live, shared by every worker."""

    cache_url: str = setting("", help="a folder or an fsspec URL (s3://bucket/prefix, gs://…, file://…) for the "
                             "partitions' Parquet; empty = data/cache", check=any_text)
    storage_options: dict[str, Any] = setting(default_factory=dict, help="options of cache_url's filesystem, e.g. "
                                              "{ endpoint_url = \"http://minio:9000\" } (credentials: the usual "
                                              "AWS variables)", check=string_table)
