"""Batched, left-padded generation through a VLM's own processor and chat template.

Each row is one user turn with its images and its video (``prompts.benchmark_messages``); the processor gets
one list of images per row, as every family's processor takes them, and a video row's frames as a video or
as more images, as its family takes them (``shown_video``); the vision-token mask counts the tokens of every
image and frame of a row. Greedy by default. Only the new tokens are decoded, so an empty generation stays empty and is
never mistaken for an echo of the prompt.
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import torch
from PIL import Image

from aerorl_ops.config.generation import GenerationSettings
from aerorl_ops.generation.completion_clock import CompletionClock
from aerorl_ops.generation.decode import decode_new_tokens
from aerorl_ops.generation.prompts import benchmark_messages, item_prompt
from aerorl_ops.generation.shown_video import media_kwargs, shown_videos
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.models.text_only import check_text_only
from aerorl_ops.models.vision_tokens import vision_token_mask
from aerorl_ops.rows.task_item import TaskItem

logger = logging.getLogger(__name__)
DEFAULT_SETTINGS = GenerationSettings()  # the [generation] defaults: greedy


@dataclass(frozen=True)
class GeneratedSample:
    """One row's generation and its measurements."""

    sample_id: str
    prompt: str
    response: str
    raw_response: str
    generated_tokens: int
    prompt_text_tokens: int
    vision_tokens: int  # every image's and video frame's
    image_count: int
    latency_ms: float
    batch_latency_ms: float
    batch_index: int
    batch_size: int
    video_frames: int = 0  # the frames of the row's video (none without one)


@dataclass(frozen=True)
class BatchProgress:
    done: int
    total: int
    elapsed_s: float

    @property
    def rate(self) -> float:
        return self.done / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def eta_s(self) -> float:
        return (self.total - self.done) / self.rate if self.rate > 0 else float("inf")


@dataclass(frozen=True)
class RowsStart:
    """Where a run of a partition's rows starts within the partition: the index of its first batch and the
    position of its first row (a partition generates its row groups one after another: ``row_groups``)."""

    batch_index: int = 0
    position: int = 0

    def after(self, samples: Sequence[GeneratedSample]) -> RowsStart:
        """The start of the rows after ``samples`` (this run's, generated from here)."""
        if not samples:
            return self
        return RowsStart(max(sample.batch_index for sample in samples) + 1, self.position + len(samples))


PARTITION_START = RowsStart()
"""A partition's first rows: batch 0, position 0."""


class OutOfMemoryAtBatchOne(RuntimeError):
    """Generation ran out of memory even one sample at a time."""


def decode_images(item: TaskItem) -> list[Image.Image]:
    """The item's images, in order, as RGB."""
    return _rgb(item.images)


def decode_frames(item: TaskItem) -> list[Image.Image]:
    """The item's video frames, in time order, as RGB (none without a video)."""
    return _rgb(item.video)


def _rgb(encoded: Sequence[bytes]) -> list[Image.Image]:
    return [Image.open(io.BytesIO(image)).convert("RGB") for image in encoded]


def shown_rows(loaded: LoadedVLM, rows: Sequence[TaskItem]) -> list[TaskItem]:
    """Each row with its benchmark messages (``prompts.benchmark_messages``), its video as ``loaded``'s model
    takes it: kept as a video, or its frames among its images (``shown_video.shown_videos``)."""
    return shown_videos(loaded, [replace(r, messages=tuple(benchmark_messages(r))) for r in rows])


def prompt_texts(loaded: LoadedVLM, rows: Sequence[TaskItem]) -> list[str]:
    """Each row's prompt through the model's chat template, with its image and video placeholders, as the model is
    shown the row (``shown_rows``: every backend's prompt)."""
    return [_template(loaded, shown) for shown in shown_rows(loaded, rows)]


def _template(loaded: LoadedVLM, shown: TaskItem) -> str:
    return loaded.processor.apply_chat_template(list(shown.messages), add_generation_prompt=True, tokenize=False)


def encode_prompts(loaded: LoadedVLM, rows: Sequence[TaskItem]):
    """Chat-templated prompts with their images (one list per prompt, empty for a text-only row) and videos,
    left-padded, on the model's device (``LoadedVLM.on_device``); a text-only row shown to a family that cannot
    take one is refused in one line (``models.text_only``), and so is a batch mixing video and images for a
    family that cannot take both (``models.video_input.check_batch_mix``)."""
    shown = shown_rows(loaded, rows)
    check_text_only(loaded.processor, loaded.source.label, [len(r.images) + len(r.video) for r in shown])
    texts = [_template(loaded, r) for r in shown]
    media = media_kwargs(loaded, texts, [decode_images(r) for r in shown], [decode_frames(r) for r in shown],
                         [r.video_fps for r in shown])
    inputs = loaded.processor(text=texts, **media, return_tensors="pt", padding=True)
    return loaded.on_device(inputs)


def eos_token_ids(loaded: LoadedVLM) -> list[int]:
    eos = loaded.generation_config.eos_token_id
    if eos is None:
        eos = loaded.tokenizer.eos_token_id
    return list(eos) if isinstance(eos, (list, tuple)) else [eos]


def generate_batch(loaded: LoadedVLM, rows: Sequence[TaskItem], settings: GenerationSettings,
                   batch_index: int = 0) -> list[GeneratedSample]:
    """Generate for ``rows`` in one left-padded batch; the model gets every input the processor returns."""
    inputs = encode_prompts(loaded, rows)
    vision = vision_token_mask(inputs["input_ids"], loaded.vision.token_ids)  # [B, T]
    eos_ids = eos_token_ids(loaded)
    clock = CompletionClock(eos_ids, len(rows))
    if settings.do_sample:
        torch.manual_seed(settings.seed + batch_index)
    clock.start()
    new = decode_new_tokens(loaded, inputs, settings.max_new_tokens, settings.generate_kwargs(), eos_ids,
                            suppressed=[], stopping_criteria=[clock])  # a benchmark answer may be any token
    batch_ms = (time.perf_counter() - clock._started) * 1000.0
    new_tokens = new.token_ids  # [B, N]
    finish_s = clock.seconds_per_row() if new.finished_s is None else new.finished_s
    samples = []
    for i, row in enumerate(rows):
        tokens = trim_after_eos(new_tokens[i], eos_ids)
        text_tokens = int(inputs["attention_mask"][i].sum()) - int(vision[i].sum())
        samples.append(GeneratedSample(
            sample_id=row.item_id,
            prompt=item_prompt(row),
            response=loaded.tokenizer.decode(tokens, skip_special_tokens=True).strip(),
            raw_response=loaded.tokenizer.decode(tokens, skip_special_tokens=False),
            generated_tokens=len(tokens),
            prompt_text_tokens=text_tokens,
            vision_tokens=int(vision[i].sum()),
            image_count=len(row.images),
            latency_ms=finish_s[i] * 1000.0,
            batch_latency_ms=batch_ms,
            batch_index=batch_index,
            batch_size=len(rows),
            video_frames=len(row.video),
        ))
    return samples


def trim_after_eos(tokens: list[int], eos_ids: list[int]) -> list[int]:
    """New tokens up to and including the first EOS; padding after it is not generated text."""
    for position, token in enumerate(tokens):
        if token in eos_ids:
            return tokens[: position + 1]
    return tokens


def _is_out_of_memory(error: BaseException) -> bool:
    return isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error).lower()


def generate_rows(
    loaded: LoadedVLM,
    rows: Sequence[TaskItem],
    batch_size: int,
    settings: GenerationSettings = DEFAULT_SETTINGS,
    on_progress: Callable[[BatchProgress], None] | None = None,
    generate_fn: Callable[..., list[GeneratedSample]] = generate_batch,
    first_batch: int = 0,
) -> list[GeneratedSample]:
    """Generate for every row in batches of ``batch_size``, in row order, the batches numbered (and, when
    sampling, seeded) from ``first_batch`` on.

    A CUDA out-of-memory error halves the batch size and retries the same rows, logged,
    down to batch 1; out of memory at batch 1 raises :class:`OutOfMemoryAtBatchOne`.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    results: list[GeneratedSample] = []
    started = time.perf_counter()
    current = batch_size
    position = 0
    batch_index = first_batch
    while position < len(rows):
        chunk = rows[position: position + current]
        try:
            results.extend(generate_fn(loaded, chunk, settings, batch_index=batch_index))
        except (torch.OutOfMemoryError, RuntimeError) as error:
            if not _is_out_of_memory(error):
                raise
            if loaded.device.type == "cuda":
                torch.cuda.empty_cache()
            if current == 1:
                raise OutOfMemoryAtBatchOne(
                    f"out of memory generating sample {chunk[0].item_id!r} even at batch size 1 "
                    f"(requested batch size {batch_size}); use a smaller model, fewer max_new_tokens or a larger device"
                ) from error
            logger.warning("out of memory at batch size %d on samples starting %r; retrying at %d",
                           current, chunk[0].item_id, current // 2)
            current //= 2
            continue
        position += len(chunk)
        batch_index += 1
        if on_progress is not None:
            on_progress(BatchProgress(position, len(rows), time.perf_counter() - started))
    return results


def batches(items: Sequence, size: int) -> Iterator[Sequence]:
    for start in range(0, len(items), size):
        yield items[start: start + size]
