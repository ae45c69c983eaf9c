"""Batched greedy generation on the embedded tiny model: batch size never changes an answer, and
only new tokens are decoded, so an empty generation stays empty."""

from __future__ import annotations

import io

import pytest
import torch
from PIL import Image

from aerorl_ops.generation.batched import GenerationSettings, generate_batch, generate_rows
from aerorl_ops.generation.prompts import chat_messages, user_prompt
from aerorl_ops.rows import TaskItem

SETTINGS = GenerationSettings(max_new_tokens=6)


def small_image_row() -> TaskItem:
    buffer = io.BytesIO()
    Image.new("RGB", (120, 90), (30, 60, 90)).save(buffer, format="PNG")
    return TaskItem(item_id="hand-made-120x90", dataset="docvqa", split="validation", source="test",
                    question="What colour is it?", answers=("blue",), images=(buffer.getvalue(),))


@pytest.fixture(scope="module")
def mixed_rows(few_rows) -> list[TaskItem]:
    """Five rows of three image sizes (448x448 documents, 448x336 charts, one 120x90 image)."""
    return [few_rows[0], few_rows[3], small_image_row(), few_rows[1], few_rows[4]]


def observable(sample) -> tuple:
    return (sample.sample_id, sample.prompt, sample.response, sample.raw_response, sample.generated_tokens,
            sample.prompt_text_tokens, sample.vision_tokens)


def test_greedy_answers_do_not_depend_on_batch_size(tiny_vlm, mixed_rows):
    one = generate_rows(tiny_vlm, mixed_rows, 1, SETTINGS)
    four = generate_rows(tiny_vlm, mixed_rows, 4, SETTINGS)
    assert [observable(s) for s in one] == [observable(s) for s in four]
    assert [s.sample_id for s in four] == [r.item_id for r in mixed_rows]
    assert [(s.batch_index, s.batch_size) for s in four] == [(0, 4)] * 4 + [(1, 1)]
    assert [(s.batch_index, s.batch_size) for s in one] == [(i, 1) for i in range(5)]
    assert all(1 <= s.generated_tokens <= SETTINGS.max_new_tokens for s in four)
    assert len({s.vision_tokens for s in four}) == 3  # three image sizes, three placeholder counts
    assert all(s.latency_ms <= s.batch_latency_ms for s in four)


def test_left_padded_batch_scores_match_single_rows(tiny_vlm, mixed_rows):
    """The next-token logits of each row are the same alone and inside a padded batch."""
    processor, model = tiny_vlm.processor, tiny_vlm.model
    images = [Image.open(io.BytesIO(r.images[0])).convert("RGB") for r in mixed_rows[:3]]
    texts = [processor.apply_chat_template(chat_messages(r.question), add_generation_prompt=True, tokenize=False)
             for r in mixed_rows[:3]]
    with torch.inference_mode():
        batch = processor(text=texts, images=images, return_tensors="pt", padding=True)
        assert (batch["attention_mask"][:, -1] == 1).all()  # padding is on the left
        batched = model(**batch).logits[:, -1]  # [3, V]
        for row, (text, image) in enumerate(zip(texts, images, strict=True)):
            alone = model(**processor(text=[text], images=[image], return_tensors="pt")).logits[0, -1]  # [V]
            torch.testing.assert_close(batched[row], alone, atol=1e-4, rtol=1e-4)


def force_eos_first(loaded, rows_to_end: set[int]):
    """Make the model's first new token EOS for the given batch rows (a real ``generate`` call)."""
    eos_id = loaded.tokenizer.convert_tokens_to_ids("<|im_end|>")
    steps = {"count": 0}

    def hook(module, inputs, logits):  # logits: [B, T, V]
        if steps["count"] == 0:
            for row in rows_to_end:
                logits[row, -1, eos_id] += 1e4
        steps["count"] += 1
        return logits

    return loaded.model.lm_head.register_forward_hook(hook)


def test_empty_generation_decodes_to_empty_text_not_the_prompt(fresh_tiny_vlm, tiny_vlm, mixed_rows):
    rows = mixed_rows[:2]
    reference = generate_rows(tiny_vlm, rows[1:], 1, SETTINGS)[0]
    handle = force_eos_first(fresh_tiny_vlm, {0})
    try:
        empty, other = generate_batch(fresh_tiny_vlm, rows, SETTINGS)
    finally:
        handle.remove()
    assert empty.response == ""
    assert empty.raw_response == "<|im_end|>" and empty.generated_tokens == 1
    assert empty.prompt == user_prompt(rows[0].question) != empty.response
    # the other row of the batch is untouched by its neighbour ending early
    assert observable(other)[2:] == observable(reference)[2:]
    assert empty.latency_ms < other.latency_ms  # row 0 finished at the first step


def test_a_batch_where_every_row_ends_at_once(fresh_tiny_vlm, mixed_rows):
    handle = force_eos_first(fresh_tiny_vlm, {0, 1, 2})
    try:
        samples = generate_batch(fresh_tiny_vlm, mixed_rows[:3], SETTINGS)
    finally:
        handle.remove()
    assert [(s.response, s.generated_tokens) for s in samples] == [("", 1)] * 3
    assert all(r.question not in s.response for r, s in zip(mixed_rows[:3], samples, strict=True))


def test_settings_validation():
    with pytest.raises(ValueError, match="max_new_tokens"):
        GenerationSettings(max_new_tokens=0)
    with pytest.raises(ValueError, match="temperature"):
        GenerationSettings(do_sample=True, temperature=0.0)
    assert GenerationSettings().generate_kwargs()["do_sample"] is False
    assert GenerationSettings(do_sample=True).generate_kwargs()["top_k"] == 0
