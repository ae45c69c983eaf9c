"""Out-of-memory handling in ``generate_rows``: halve the batch and retry, down to batch size 1."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import torch

from aerorl_ops.generation.batched import GeneratedSample, GenerationSettings, OutOfMemoryAtBatchOne, generate_rows
from aerorl_ops.rows import TaskItem

CPU_MODEL = SimpleNamespace(device=torch.device("cpu"))


def rows(count: int) -> list[TaskItem]:
    return [TaskItem(item_id=f"s{i}", dataset="docvqa", split="validation", source="test", question=f"q{i}",
                     answers=("a",), images=(b"png",)) for i in range(count)]


class FakeGenerate:
    """Stands in for ``generate_batch``: raises for chunks larger than ``fits``, records every call."""

    def __init__(self, fits: int, error: Exception | None = None) -> None:
        self.fits = fits
        self.error = error or torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        self.calls: list[tuple[list[str], str]] = []

    def __call__(self, loaded, chunk, settings, batch_index=0):
        ids = [row.item_id for row in chunk]
        if len(chunk) > self.fits:
            self.calls.append((ids, "failed"))
            raise self.error
        self.calls.append((ids, "ok"))
        return [GeneratedSample(sample_id=row.item_id, prompt=row.question, response=f"answer {row.item_id}",
                                raw_response="", generated_tokens=1, prompt_text_tokens=1, vision_tokens=4,
                                image_count=1, latency_ms=1.0, batch_latency_ms=1.0, batch_index=batch_index,
                                batch_size=len(chunk)) for row in chunk]


def test_out_of_memory_above_two_finishes_every_row_at_batch_two(caplog):
    fake = FakeGenerate(fits=2)
    with caplog.at_level(logging.WARNING):
        samples = generate_rows(CPU_MODEL, rows(7), batch_size=8, settings=GenerationSettings(), generate_fn=fake)
    assert [s.sample_id for s in samples] == [f"s{i}" for i in range(7)]
    assert fake.calls == [
        ([f"s{i}" for i in range(7)], "failed"),  # 8 -> 4
        (["s0", "s1", "s2", "s3"], "failed"),  # 4 -> 2
        (["s0", "s1"], "ok"), (["s2", "s3"], "ok"), (["s4", "s5"], "ok"), (["s6"], "ok"),
    ]
    assert [s.batch_index for s in samples] == [0, 0, 1, 1, 2, 2, 3]
    assert "retrying at 4" in caplog.text and "retrying at 2" in caplog.text


def test_out_of_memory_at_batch_one_names_the_sample():
    fake = FakeGenerate(fits=0)
    with pytest.raises(OutOfMemoryAtBatchOne, match=r"'s0'.*batch size 1.*requested batch size 4") as raised:
        generate_rows(CPU_MODEL, rows(3), batch_size=4, generate_fn=fake)
    assert isinstance(raised.value.__cause__, torch.OutOfMemoryError)
    assert [len(ids) for ids, _ in fake.calls] == [3, 2, 1]


def test_out_of_memory_later_in_the_run_names_that_sample():
    fake = FakeGenerate(fits=8)
    seen = []

    def fits_until_s2(loaded, chunk, settings, batch_index=0):
        if chunk[0].item_id == "s2":
            raise torch.OutOfMemoryError("CUDA out of memory")
        seen.append([row.item_id for row in chunk])
        return fake(loaded, chunk, settings, batch_index)

    with pytest.raises(OutOfMemoryAtBatchOne, match="'s2'"):
        generate_rows(CPU_MODEL, rows(4), batch_size=2, generate_fn=fits_until_s2)
    assert seen == [["s0", "s1"]]  # the first batch was generated before s2 ran out of memory


def test_other_runtime_errors_are_not_retried():
    fake = FakeGenerate(fits=0, error=RuntimeError("shape mismatch in attention"))
    with pytest.raises(RuntimeError, match="shape mismatch"):
        generate_rows(CPU_MODEL, rows(4), batch_size=4, generate_fn=fake)
    assert len(fake.calls) == 1


def test_progress_is_reported_per_batch():
    progress = []
    generate_rows(CPU_MODEL, rows(5), batch_size=2, generate_fn=FakeGenerate(fits=8), on_progress=progress.append)
    assert [(p.done, p.total) for p in progress] == [(2, 5), (4, 5), (5, 5)]


def test_batch_size_must_be_positive():
    with pytest.raises(ValueError, match="batch_size"):
        generate_rows(CPU_MODEL, rows(1), batch_size=0, generate_fn=FakeGenerate(fits=8))
