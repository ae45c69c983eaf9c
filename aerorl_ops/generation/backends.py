"""Which backend generates a benchmark partition: the one its model entry's ``backend`` names.

A backend opens a :class:`RowGenerator` for the length of one partition: transformers' batched
``generate`` on the loaded model ("hf"), or a vLLM engine started for the partition and shut down
after it ("vllm", :mod:`aerorl_ops.generation.vllm_backend`). Both return the same
:class:`GeneratedSample` records, so scoring and reports do not know which one ran.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

from aerorl_ops.config.generation import GenerationSettings
from aerorl_ops.generation.batched import PARTITION_START, BatchProgress, GeneratedSample, RowsStart, generate_rows
from aerorl_ops.generation.vllm_backend import vllm_row_generator
from aerorl_ops.generation.vllm_engine import SINGLE_IMAGE, MediaLimits
from aerorl_ops.models.entry import HF_BACKEND, VLLM_BACKEND
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rows.task_item import TaskItem


class RowGenerator(Protocol):
    """Rows in, one :class:`GeneratedSample` per row out, in row order."""

    @property
    def device(self) -> str: ...

    @property
    def start_seconds(self) -> float:
        """Time to get ready beyond loading the model (starting an engine); 0 for transformers."""
        ...

    def generate_rows(self, rows: Sequence[TaskItem], batch_size: int, settings: GenerationSettings,
                      on_progress: Callable[[BatchProgress], None] | None = None,
                      start: RowsStart = PARTITION_START) -> list[GeneratedSample]:
        """Every row in batches of ``batch_size``, numbered and seeded on from ``start`` (a partition's
        later group of rows goes on from its earlier ones: ``generation.row_groups``)."""
        ...


class HFRowGenerator:
    """transformers' batched ``generate`` on the loaded model (:func:`batched.generate_rows`)."""

    start_seconds = 0.0

    def __init__(self, loaded: LoadedVLM) -> None:
        self.loaded = loaded

    @property
    def device(self) -> str:
        return str(self.loaded.device)

    def generate_rows(self, rows: Sequence[TaskItem], batch_size: int, settings: GenerationSettings,
                      on_progress: Callable[[BatchProgress], None] | None = None,
                      start: RowsStart = PARTITION_START) -> list[GeneratedSample]:
        return generate_rows(self.loaded, rows, batch_size, settings, on_progress=on_progress,
                             first_batch=start.batch_index)


@contextmanager
def hf_row_generator(loaded: LoadedVLM, settings: GenerationSettings, limits: MediaLimits) -> Iterator[HFRowGenerator]:
    yield HFRowGenerator(loaded)  # the processor takes any number of images per row


ROW_GENERATORS: dict[str, Callable[[LoadedVLM, GenerationSettings, MediaLimits],
                                   AbstractContextManager[RowGenerator]]] = {
    HF_BACKEND: hf_row_generator,
    VLLM_BACKEND: vllm_row_generator,
}


def open_row_generator(loaded: LoadedVLM, settings: GenerationSettings,
                       limits: MediaLimits = SINGLE_IMAGE) -> AbstractContextManager[RowGenerator]:
    """The row generator of ``loaded``'s backend, for ``with``, for rows showing at most ``limits``' images and
    videos each (``shown_video.media_limits``)."""
    return ROW_GENERATORS[loaded.source.backend.name](loaded, settings, limits)
