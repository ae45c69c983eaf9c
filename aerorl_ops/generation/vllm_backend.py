"""Benchmark rows through a vLLM engine: the prompts of the transformers path, the same records.

The prompt is the model's chat template applied by its own processor (``batched.prompt_texts``),
sent with the row's images and video as ``multi_modal_data``; vLLM expands each image and video placeholder
with its copy of the model's processors. A video row is shown as transformers shows it (``shown_video``): its
frames as one video, already sampled, or as images. The engine takes as many images and videos per prompt
as the partition's largest row shows (``shown_video.media_limits``; one image for a partition of single-image
rows, as always); a family whose video vLLM cannot take is refused before the engine starts
(``vllm_engine.check_engine_video``).
A batch is the rows submitted to the engine together (its
scheduler then runs them as it sees fit); no out-of-memory halving, since vLLM sizes its own
batches to the KV cache. Per sample: the time from submission until its request finished, and the
token counts of the prompt vLLM ran (text and vision tokens) and of the completion up to and
including EOS.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from aerorl_ops.config.generation import GenerationSettings
from aerorl_ops.generation.batched import (
    PARTITION_START,
    BatchProgress,
    GeneratedSample,
    RowsStart,
    decode_frames,
    decode_images,
    eos_token_ids,
    prompt_texts,
    shown_rows,
    trim_after_eos,
)
from aerorl_ops.generation.prompts import item_prompt
from aerorl_ops.generation.vllm_engine import (
    Engine,
    EngineRequest,
    EngineVideo,
    MediaLimits,
    check_engine_video,
    started_engine,
)
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rows.task_item import TaskItem


def sampling_params(engine: Engine, settings: GenerationSettings, eos_ids: Sequence[int], seed: int):
    """``settings`` as vLLM sampling parameters: greedy is temperature 0; ``seed`` seeds a sampled request."""
    if not settings.do_sample:
        return engine.sampling_params(max_tokens=settings.max_new_tokens, stop_token_ids=eos_ids)
    return engine.sampling_params(max_tokens=settings.max_new_tokens, temperature=settings.temperature,
                                  top_k=settings.top_k, top_p=settings.top_p, seed=seed, stop_token_ids=eos_ids)


class VLLMRowGenerator:
    """Rows of one benchmark partition through a started engine, as :class:`GeneratedSample` records."""

    def __init__(self, engine: Engine, loaded: LoadedVLM) -> None:
        self.engine = engine
        self.loaded = loaded
        self.eos_ids = eos_token_ids(loaded)
        self.vision_ids = set(loaded.vision.token_ids)  # the transformers model's own (``vision_trace``)

    @property
    def device(self) -> str:
        return self.engine.device

    @property
    def start_seconds(self) -> float:
        return self.engine.start_seconds

    def generate_rows(self, rows: Sequence[TaskItem], batch_size: int, settings: GenerationSettings,
                      on_progress: Callable[[BatchProgress], None] | None = None,
                      start: RowsStart = PARTITION_START) -> list[GeneratedSample]:
        """Every row, ``batch_size`` requests submitted together at a time, in row order, the batches numbered
        on from ``start.batch_index``.

        A sampled row is seeded with ``settings.seed`` plus its position in the partition (``start.position``
        plus its position here), whatever its batch.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        samples: list[GeneratedSample] = []
        started = time.perf_counter()
        for batch_index, position in enumerate(range(0, len(rows), batch_size), start=start.batch_index):
            samples.extend(self.generate_batch(rows[position: position + batch_size], settings, batch_index,
                                               start.position + position))
            if on_progress is not None:
                on_progress(BatchProgress(len(samples), len(rows), time.perf_counter() - started))
        return samples

    def requests(self, rows: Sequence[TaskItem]) -> list[EngineRequest]:
        """Each row's prompt (``batched.prompt_texts``) with its images and video as the model is shown them
        (``batched.shown_rows``)."""
        return [EngineRequest(text, tuple(decode_images(shown)),
                              EngineVideo(tuple(decode_frames(shown)), shown.video_fps))
                for text, shown in zip(prompt_texts(self.loaded, rows), shown_rows(self.loaded, rows), strict=True)]

    def generate_batch(self, rows: Sequence[TaskItem], settings: GenerationSettings, batch_index: int,
                       first_position: int) -> list[GeneratedSample]:
        requests = self.requests(rows)
        params = [sampling_params(self.engine, settings, self.eos_ids, settings.seed + first_position + i)
                  for i in range(len(rows))]
        started = time.perf_counter()
        outputs = self.engine.run(requests, params)
        batch_ms = (time.perf_counter() - started) * 1000.0
        tokenizer = self.loaded.tokenizer
        samples = []
        for row, output in zip(rows, outputs, strict=True):
            tokens = trim_after_eos(list(output.token_ids[0]), self.eos_ids)
            vision = sum(token in self.vision_ids for token in output.prompt_token_ids)
            samples.append(GeneratedSample(
                sample_id=row.item_id,
                prompt=item_prompt(row),
                response=tokenizer.decode(tokens, skip_special_tokens=True).strip(),
                raw_response=tokenizer.decode(tokens, skip_special_tokens=False),
                generated_tokens=len(tokens),
                prompt_text_tokens=len(output.prompt_token_ids) - vision,
                vision_tokens=vision,
                image_count=len(row.images),
                latency_ms=output.finished_s * 1000.0,
                batch_latency_ms=batch_ms,
                batch_index=batch_index,
                batch_size=len(rows),
                video_frames=len(row.video),
            ))
        return samples


@contextmanager
def vllm_row_generator(loaded: LoadedVLM, settings: GenerationSettings,
                       limits: MediaLimits) -> Iterator[VLLMRowGenerator]:
    """An engine for ``loaded``'s model (its backend's engine settings, seeded with ``settings.seed``) taking
    up to ``limits``' images and videos per prompt, shut down on exit."""
    check_engine_video(loaded.processor, loaded.source.label, limits)
    with started_engine(loaded.source, loaded.dtype, settings.seed, limits=limits) as engine:
        yield VLLMRowGenerator(engine, loaded)
