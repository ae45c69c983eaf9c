"""One benchmark partition's generation: every row through one model at one batch size, by the
model's backend (transformers or vLLM, ``generation.backends``), with telemetry sampled around it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import pyarrow as pa

from aerorl_ops.config.generation import GenerationSettings
from aerorl_ops.generation.backends import open_row_generator
from aerorl_ops.generation.batched import BatchProgress, max_image_count
from aerorl_ops.generation.generations_table import generations_table
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rows.task_item import TaskItem
from aerorl_ops.telemetry import TelemetrySampler, TelemetrySummary

STATS_METADATA_KEY = b"aerorl.partition_stats"


@dataclass(frozen=True)
class PartitionStats:
    """Partition-level measurements that travel with the cached generations.

    ``telemetry`` is None when nothing was sampled (tables made by hand). ``model_load_s`` includes
    starting the backend's engine (vLLM); ``wall_s`` is generation alone.
    """

    model_source: str
    device: str
    batch_size: int
    samples: int
    wall_s: float
    model_load_s: float
    telemetry: TelemetrySummary | None
    generation: dict[str, object]  # the GenerationSettings actually used
    backend: str = "hf"  # the model entry's backend (tables cached before backends existed: "hf")


def run_generation(loaded: LoadedVLM, rows: Sequence[TaskItem], batch_size: int, settings: GenerationSettings,
                   telemetry_interval_s: float = 0.2,
                   on_progress: Callable[[BatchProgress], None] | None = None) -> pa.Table:
    """Generations for ``rows`` as a ``GENERATION_SCHEMA`` table carrying :class:`PartitionStats`.

    A vLLM engine that does not start raises ``vllm_engine.EngineStartError`` with vLLM's message.
    """
    with open_row_generator(loaded, settings, max_image_count(rows)) as generator:
        with TelemetrySampler(interval_s=telemetry_interval_s, device=loaded.device) as sampler:
            started = time.perf_counter()
            samples = generator.generate_rows(rows, batch_size, settings, on_progress=on_progress)
            wall_s = time.perf_counter() - started
    stats = PartitionStats(
        model_source=loaded.source.location,
        device=generator.device,
        batch_size=batch_size,
        samples=len(samples),
        wall_s=wall_s,
        model_load_s=loaded.load_seconds + generator.start_seconds,
        telemetry=sampler.summary(),
        generation=asdict(settings),
        backend=loaded.source.backend.name,
    )
    return with_partition_stats(generations_table(rows, samples), stats)


def with_partition_stats(table: pa.Table, stats: PartitionStats) -> pa.Table:
    metadata = dict(table.schema.metadata or {})
    telemetry = None if stats.telemetry is None else stats.telemetry.as_record()
    metadata[STATS_METADATA_KEY] = json.dumps({**asdict(stats), "telemetry": telemetry}).encode()
    return table.replace_schema_metadata(metadata)


def partition_stats(table: pa.Table) -> PartitionStats:
    """The stats a table from :func:`run_generation` carries (also after a Parquet round trip)."""
    raw = (table.schema.metadata or {}).get(STATS_METADATA_KEY)
    if raw is None:
        raise ValueError("this generations table carries no partition stats; was it made by run_generation?")
    fields = json.loads(raw)
    telemetry = fields.pop("telemetry")
    return PartitionStats(**fields, telemetry=TelemetrySummary.from_record(telemetry) if telemetry else None)
