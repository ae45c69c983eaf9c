"""Reliability: running out of GPU memory halves the batch and retries, logged, down to batch 1.

Out-of-memory errors are injected around the real ``generate_batch`` on the tiny model (no GPU
needed): a chunk larger than what "fits" raises ``torch.OutOfMemoryError`` (or the older CUDA
``RuntimeError`` text). The retried rows give exactly the answers a plain batch-1 run gives; each
halving is a WARNING record; out of memory at batch 1 fails naming the sample. Through the real
``benchmark`` job the partition still lands every row.
"""

from __future__ import annotations

import logging

import pytest
import torch
from transformers import Qwen2VLForConditionalGeneration

from aerorl_ops.generation.batched import GenerationSettings, OutOfMemoryAtBatchOne, generate_batch, generate_rows

SETTINGS = GenerationSettings(max_new_tokens=3)
LOGGER = "aerorl_ops.generation.batched"


class OutOfMemoryAbove:
    """``generate_batch`` that raises an out-of-memory error for chunks larger than ``fits``."""

    def __init__(self, fits: int, error: Exception | None = None) -> None:
        self.fits = fits
        self.error = error or torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        self.chunks: list[int] = []

    def __call__(self, loaded, chunk, settings, batch_index=0):
        self.chunks.append(len(chunk))
        if len(chunk) > self.fits:
            raise self.error
        return generate_batch(loaded, chunk, settings, batch_index=batch_index)


def answers(samples) -> list[tuple]:
    return [(s.sample_id, s.response, s.raw_response, s.generated_tokens) for s in samples]


@pytest.fixture(scope="module")
def batch_one_answers(tiny_vlm, few_rows):
    return answers(generate_rows(tiny_vlm, few_rows[:4], 1, SETTINGS))


def retry_records(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


@pytest.mark.parametrize("error", [
    torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
    RuntimeError("CUDA error: out of memory"),
], ids=["OutOfMemoryError", "RuntimeError"])
def test_out_of_memory_halves_down_to_one_and_gives_the_same_answers(tiny_vlm, few_rows, batch_one_answers,
                                                                     caplog, error):
    rows = few_rows[:4]
    generate = OutOfMemoryAbove(fits=1, error=error)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        samples = generate_rows(tiny_vlm, rows, 4, SETTINGS, generate_fn=generate)

    assert generate.chunks == [4, 2, 1, 1, 1, 1]
    assert answers(samples) == batch_one_answers
    assert [(s.batch_index, s.batch_size) for s in samples] == [(0, 1), (1, 1), (2, 1), (3, 1)]
    assert retry_records(caplog) == [
        f"out of memory at batch size 4 on samples starting {rows[0].item_id!r}; retrying at 2",
        f"out of memory at batch size 2 on samples starting {rows[0].item_id!r}; retrying at 1",
    ]


def test_the_smaller_batch_is_kept_for_the_rest_of_the_rows(tiny_vlm, few_rows, caplog):
    generate = OutOfMemoryAbove(fits=2)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        samples = generate_rows(tiny_vlm, few_rows, 4, SETTINGS, generate_fn=generate)
    assert generate.chunks == [4, 2, 2, 1]  # 5 rows: one halving, then pairs, then the last row
    assert [s.sample_id for s in samples] == [row.item_id for row in few_rows]
    assert len(retry_records(caplog)) == 1


def test_out_of_memory_at_batch_one_fails_naming_the_sample(tiny_vlm, few_rows, caplog):
    rows = few_rows[:4]
    generate = OutOfMemoryAbove(fits=0)
    with caplog.at_level(logging.WARNING, logger=LOGGER), pytest.raises(OutOfMemoryAtBatchOne) as raised:
        generate_rows(tiny_vlm, rows, 4, SETTINGS, generate_fn=generate)

    assert str(raised.value).startswith(
        f"out of memory generating sample {rows[0].item_id!r} even at batch size 1 (requested batch size 4)")
    assert isinstance(raised.value.__cause__, torch.OutOfMemoryError)
    assert generate.chunks == [4, 2, 1]
    assert len(retry_records(caplog)) == 2


def test_other_errors_are_not_mistaken_for_out_of_memory(tiny_vlm, few_rows, caplog):
    generate = OutOfMemoryAbove(fits=0, error=RuntimeError("Expected all tensors to be on the same device"))
    with caplog.at_level(logging.WARNING, logger=LOGGER), pytest.raises(RuntimeError, match="same device"):
        generate_rows(tiny_vlm, few_rows, 4, SETTINGS, generate_fn=generate)
    assert generate.chunks == [4]
    assert retry_records(caplog) == []


def test_partition_survives_out_of_memory_through_the_real_job(bench, monkeypatch, caplog):
    """The model's own ``generate`` runs out of memory above one sample: the partition still lands
    every row (keyed by its configured batch size), and the halvings are in the log."""
    bench.materialize_rows("oom-run")
    original = Qwen2VLForConditionalGeneration.generate

    def out_of_memory_above_one(model, *args, **kwargs):
        if kwargs["input_ids"].shape[0] > 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return original(model, *args, **kwargs)

    monkeypatch.setattr(Qwen2VLForConditionalGeneration, "generate", out_of_memory_above_one)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        result = bench.run_partition(4, "oom-run")

    assert result.success
    assert bench.partition_counts("oom-run", 4) == {"generations": 8, "reward_scores": 8, "benchmark_summary": 4}
    # two generation passes, each starting at the configured batch size: the 6 rows of docvqa, chartqa and
    # easy_vqa, then ARC's 2 (their own max_new_tokens); each halves down to one sample per batch
    assert [message.split(" on samples")[0] for message in retry_records(caplog)] == [
        "out of memory at batch size 4", "out of memory at batch size 2"] * 2
    batches = bench.query("SELECT batch_index FROM generations WHERE run_id = 'oom-run' ORDER BY batch_index")
    assert batches == [(index,) for index in range(8)]  # the partition's 8 batches, one sample each
