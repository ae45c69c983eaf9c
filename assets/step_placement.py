"""Where steps run when an executor spreads them over workers: op tags, written once.

- Steps that write the DuckDB report hold the ``duckdb_writer`` pool (one at a time on one Dagster
  instance) and carry the Celery queue tag ``duckdb_writer``, which one worker serves on the
  machine with the database: no partition worker ever opens the file.
- A partition's generation step asks Kubernetes for its GPUs through the ``dagster-k8s/config`` tag.
"""

from __future__ import annotations

DUCKDB_WRITER_POOL = "duckdb_writer"
DUCKDB_WRITER_QUEUE = "duckdb_writer"
PARTITION_QUEUE = "dagster"
"""dagster-celery's default queue: every step without a queue tag (generation, scoring)."""
WORKER_QUEUES = (PARTITION_QUEUE, DUCKDB_WRITER_QUEUE)
"""The queues an ``aerorl worker`` may serve (here, not beside the executors, so ``aerorl worker -h``
lists them without importing Dagster)."""
CELERY_QUEUE_TAG = "dagster-celery/queue"  # dagster_celery.tags.DAGSTER_CELERY_QUEUE_TAG
K8S_CONFIG_TAG = "dagster-k8s/config"  # dagster_k8s.job.USER_DEFINED_K8S_CONFIG_KEY
GPU_RESOURCE = "nvidia.com/gpu"

DUCKDB_WRITER_TAGS = {CELERY_QUEUE_TAG: DUCKDB_WRITER_QUEUE}


def gpu_request_tags(gpus: int) -> dict[str, object]:
    """The op tags of a step that needs ``gpus`` GPUs on Kubernetes (none for 0)."""
    if gpus <= 0:
        return {}
    limits = {GPU_RESOURCE: str(gpus)}
    return {K8S_CONFIG_TAG: {"container_config": {"resources": {"limits": limits, "requests": limits}}}}
