"""Vision placeholder positions in a tokenized Qwen2-VL batch, from its processor."""

from __future__ import annotations

import torch
from PIL import Image

from aerorl_ops.generation.prompts import chat_messages
from aerorl_ops.models.vision_tokens import vision_token_ids, vision_token_mask

SPATIAL_MERGE = 2  # Qwen2-VL merges 2x2 patches into one placeholder token


def image(width: int, height: int) -> Image.Image:
    return Image.new("RGB", (width, height), (200, 180, 160))


def test_mask_marks_exactly_the_image_pad_tokens(tiny_vlm):
    processor = tiny_vlm.processor
    prompts = [processor.apply_chat_template(chat_messages(q), add_generation_prompt=True, tokenize=False)
               for q in ("What is the total?", "Which year has the highest value on this chart?")]
    batch = processor(text=prompts, images=[image(448, 448), image(120, 90)], return_tensors="pt", padding=True)
    input_ids, grid = batch["input_ids"], batch["image_grid_thw"]  # [2, T], [2, 3]
    mask = vision_token_mask(input_ids, vision_token_ids(processor))  # [2, T]
    assert mask.shape == input_ids.shape and mask.dtype == torch.bool
    tokenizer = processor.tokenizer
    for row in range(2):
        tokens = tokenizer.convert_ids_to_tokens(input_ids[row].tolist())
        pads = [position for position, token in enumerate(tokens) if token == "<|image_pad|>"]
        assert mask[row].nonzero().flatten().tolist() == pads
        assert len(pads) == int(grid[row].prod()) // SPATIAL_MERGE**2
        # one contiguous run between <|vision_start|> and <|vision_end|>
        assert pads == list(range(pads[0], pads[-1] + 1))
        assert (tokens[pads[0] - 1], tokens[pads[-1] + 1]) == ("<|vision_start|>", "<|vision_end|>")
    counts = mask.sum(dim=1).tolist()
    assert counts[0] > counts[1]  # the larger image gets more placeholders
    assert not mask[batch["attention_mask"] == 0].any()  # left padding is never a vision token


def test_vision_token_ids_come_from_the_processor_and_agree_with_the_config(tiny_vlm):
    config = tiny_vlm.model.config
    vision_ids = vision_token_ids(tiny_vlm.processor)
    assert vision_ids == tuple(sorted({config.image_token_id, config.video_token_id}))
    ids = torch.tensor([[config.video_token_id, 5, config.image_token_id]])
    assert vision_token_mask(ids, vision_ids).tolist() == [[True, False, True]]
