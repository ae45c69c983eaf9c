"""A benchmark partition's generation (``generation.batched``) on a tiny checkpoint of every VLM
family: greedy, three prompts with their images in one left-padded batch."""

from __future__ import annotations

import pytest

from aerorl_ops.config.generation import GenerationSettings
from aerorl_ops.generation.batched import encode_prompts, generate_rows
from aerorl_ops.models.tiny_families import FAMILIES
from aerorl_ops.models.vision_tokens import vision_token_ids, vision_token_mask

MAX_NEW_TOKENS = 3


@pytest.mark.parametrize("name", list(FAMILIES))
def test_greedy_batch_of_three_with_images(name, tiny_family_vlm, few_rows):
    loaded, rows = tiny_family_vlm(name), few_rows[:3]
    settings = GenerationSettings(max_new_tokens=MAX_NEW_TOKENS)
    samples = generate_rows(loaded, rows, batch_size=3, settings=settings)
    inputs = encode_prompts(loaded, rows)
    mask = vision_token_mask(inputs["input_ids"], vision_token_ids(loaded.processor, name))  # [3, T]
    assert [s.sample_id for s in samples] == [r.item_id for r in rows]
    for i, sample in enumerate(samples):
        assert (sample.batch_size, sample.batch_index) == (3, 0)
        assert 1 <= sample.generated_tokens <= MAX_NEW_TOKENS
        assert sample.vision_tokens == int(mask[i].sum()) > 0
        assert sample.prompt_text_tokens == int(inputs["attention_mask"][i].sum()) - sample.vision_tokens > 0
    one_at_a_time = generate_rows(loaded, rows, batch_size=1, settings=settings)
    assert [s.vision_tokens for s in one_at_a_time] == [s.vision_tokens for s in samples]
