"""One benchmark partition's generation: every row through one model at one batch size, by the
model's backend (transformers or vLLM, ``generation.backends``), with telemetry sampled around it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

import pyarrow as pa

from aerorl_ops.config.generation import GenerationSettings
from aerorl_ops.generation.backends import open_row_generator
from aerorl_ops.generation.batched import BatchProgress, RowsStart, shown_rows
from aerorl_ops.generation.generations_table import generations_table
from aerorl_ops.generation.row_groups import row_groups
from aerorl_ops.generation.shown_video import media_limits
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
                   on_progress: Callable[[BatchProgress], None] | None = None,
                   max_new_tokens: Mapping[str, int] | None = None) -> pa.Table:
    """Generations for ``rows`` as a ``GENERATION_SCHEMA`` table carrying :class:`PartitionStats`; a dataset
    named in ``max_new_tokens`` gets that many new tokens per answer (``generation.row_groups``).

    A vLLM engine that does not start raises ``vllm_engine.EngineStartError`` with vLLM's message.
    """
    groups = row_groups(rows, settings, max_new_tokens or {})
    samples, start = [], RowsStart()
    with open_row_generator(loaded, settings, media_limits(shown_rows(loaded, rows))) as generator:
        with TelemetrySampler(interval_s=telemetry_interval_s, device=loaded.device) as sampler:
            started = time.perf_counter()
            for group in groups:  # numbered on from the group before: one partition, one run of batch indices
                progress = _overall(on_progress, len(samples), len(rows), started)
                generated = generator.generate_rows(group.rows, batch_size, group.settings, progress, start)
                samples, start = samples + generated, start.after(generated)
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


def _overall(on_progress: Callable[[BatchProgress], None] | None, done_before: int, total: int,
             started: float) -> Callable[[BatchProgress], None] | None:
    """A group's progress reported as the partition's: rows done before it added, over every row."""
    if on_progress is None:
        return None
    return lambda progress: on_progress(BatchProgress(done_before + progress.done, total,
                                                      time.perf_counter() - started))


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
