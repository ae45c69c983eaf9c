"""A benchmark partition's generation (``generation.batched``) on a tiny checkpoint of every VLM
family: greedy, three prompts with their images in one left-padded batch; and a row with two images
beside single-image rows."""

from __future__ import annotations

import io
import re

import pytest
from PIL import Image

from aerorl_ops.config.generation import GenerationSettings
from aerorl_ops.generation.batched import encode_prompts, generate_rows
from aerorl_ops.models.text_only import TextOnlyRowError, text_only_refusal
from aerorl_ops.models.vision_tokens import vision_token_mask
from aerorl_ops.models.vision_trace import filled_mask
from aerorl_ops.rows.task_item import TaskItem
from tests.aerorl_ops.models.family_params import family_params

MAX_NEW_TOKENS = 3


@pytest.mark.parametrize("name", family_params())
def test_greedy_batch_of_three_with_images(name, tiny_family_vlm, few_rows):
    loaded, rows = tiny_family_vlm(name), few_rows[:3]
    settings = GenerationSettings(max_new_tokens=MAX_NEW_TOKENS)
    samples = generate_rows(loaded, rows, batch_size=3, settings=settings)
    inputs = encode_prompts(loaded, rows)
    mask = vision_token_mask(inputs["input_ids"], loaded.vision.token_ids)  # [3, T]
    assert [s.sample_id for s in samples] == [r.item_id for r in rows]
    for i, sample in enumerate(samples):
        assert (sample.batch_size, sample.batch_index) == (3, 0)
        assert 1 <= sample.generated_tokens <= MAX_NEW_TOKENS
        assert sample.vision_tokens == int(mask[i].sum()) > 0
        assert sample.prompt_text_tokens == int(inputs["attention_mask"][i].sum()) - sample.vision_tokens > 0
    one_at_a_time = generate_rows(loaded, rows, batch_size=1, settings=settings)
    assert [s.vision_tokens for s in one_at_a_time] == [s.vision_tokens for s in samples]


def png(size: tuple[int, int], colour: str) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


WIDE, TALL = png((96, 64), "red"), png((64, 96), "blue")
PLACED = ({"role": "user", "content": [{"type": "text", "text": "Left "}, {"type": "image"},
                                       {"type": "text", "text": " right "}, {"type": "image"},
                                       {"type": "text", "text": " Same colour?"}]},)
TWO_IMAGE_ROWS = [TaskItem("pair", "pairs", "test", "q.jsonl", "Same colour?", ("no",), (WIDE, TALL), PLACED),
                  TaskItem("wide", "pairs", "test", "q.jsonl", "Colour?", ("red",), (WIDE,)),
                  TaskItem("tall", "pairs", "test", "q.jsonl", "Colour?", ("blue",), (TALL,))]
IMAGES_SIZED_BY_THEIR_PROMPT = {"llava-onevision"}
"""Families whose processor sizes an image by how many its prompt shows: LLaVA-OneVision tiles an image
(anyres) only when it is a prompt's one image, so an image of a two-image prompt has fewer tokens alone."""


@pytest.mark.parametrize("name", family_params())
def test_a_two_image_row_shows_both_images_and_counts_every_images_tokens(name, tiny_family_vlm):
    """A row with two images (placed by its messages) beside two single-image rows, in one left-padded batch:
    its record counts 2 images and the vision tokens of both, where the model puts their features."""
    loaded = tiny_family_vlm(name)
    settings = GenerationSettings(max_new_tokens=MAX_NEW_TOKENS)
    samples = generate_rows(loaded, TWO_IMAGE_ROWS, batch_size=3, settings=settings)
    inputs = encode_prompts(loaded, TWO_IMAGE_ROWS)
    mask = vision_token_mask(inputs["input_ids"], loaded.vision.token_ids)  # [3, T]
    pair, wide, tall = samples
    assert [s.image_count for s in samples] == [2, 1, 1]
    assert [s.vision_tokens for s in samples] == mask.sum(dim=1).tolist()
    assert all(1 <= s.generated_tokens <= MAX_NEW_TOKENS for s in samples)
    if loaded.vision.how == "feature scatter":  # the positions the model fills with features in this batch
        assert [s.vision_tokens for s in samples] == filled_mask(loaded.model, inputs).sum(dim=1).tolist()
    if name in IMAGES_SIZED_BY_THEIR_PROMPT:
        assert 0 < pair.vision_tokens < wide.vision_tokens + tall.vision_tokens
    else:
        assert pair.vision_tokens == wide.vision_tokens + tall.vision_tokens > wide.vision_tokens > 0
    one_at_a_time = generate_rows(loaded, TWO_IMAGE_ROWS, batch_size=1, settings=settings)
    assert [s.vision_tokens for s in one_at_a_time] == [s.vision_tokens for s in samples]


TEXT_ROW = TaskItem("sum", "sums", "test", "q.jsonl", "What is 2 + 2?", ("4",), ())


@pytest.mark.parametrize("name", family_params())
def test_a_text_only_row_beside_an_image_row_is_answered_with_no_vision_token_or_refused_in_one_line(
        name, tiny_family_vlm):
    loaded, rows = tiny_family_vlm(name), [TWO_IMAGE_ROWS[1], TEXT_ROW]
    settings = GenerationSettings(max_new_tokens=MAX_NEW_TOKENS)
    reason = text_only_refusal(loaded.processor)
    if reason is not None:
        refusal = rf"^model .+: a row shows no image \(1 of 2 in this batch\) and {re.escape(reason)}; "
        with pytest.raises(TextOnlyRowError, match=refusal):
            generate_rows(loaded, rows, batch_size=2, settings=settings)
        return
    together = generate_rows(loaded, rows, batch_size=2, settings=settings)
    assert [(s.sample_id, s.image_count, s.vision_tokens > 0) for s in together] == [
        ("wide", 1, True), ("sum", 0, False)]
    alone = generate_rows(loaded, [TEXT_ROW], batch_size=1, settings=settings)
    assert (alone[0].vision_tokens, alone[0].prompt_text_tokens) == (0, together[1].prompt_text_tokens)
