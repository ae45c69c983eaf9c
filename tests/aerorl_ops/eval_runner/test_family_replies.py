"""Evaluation and rollout replies (``eval_runner.replies`` / ``episodes``) on tiny checkpoints of VLM
families whose processors want one image list per prompt (Gemma 3) or drop their video part."""

from __future__ import annotations

import pytest
from PIL import Image

from aerorl_ops.envs.types import Observation
from aerorl_ops.eval_metrics.sampling import SamplingSetting
from aerorl_ops.eval_runner.episodes import generate_replies
from aerorl_ops.eval_runner.replies import encode_observations, sample_responses
from aerorl_ops.models.vision_tokens import vision_token_mask


def observation(question: str, colour: tuple[int, int, int]) -> Observation:
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}]
    return Observation(images=(Image.new("RGB", (96, 64), colour),), messages=messages)


OBSERVATIONS = [observation("What colour is it?", (200, 0, 0)), observation("What shape is it?", (0, 0, 200))]


@pytest.mark.parametrize("name", ["gemma3", "qwen2.5-vl", "internvl"])
def test_each_prompt_gets_its_own_image_and_a_greedy_reply(name, tiny_family_vlm):
    loaded = tiny_family_vlm(name)
    inputs = encode_observations(loaded, OBSERVATIONS)
    mask = vision_token_mask(inputs["input_ids"], loaded.vision.token_ids)  # [2, T]
    counts = mask.sum(dim=1).tolist()
    assert counts[0] == counts[1] > 0  # one image per prompt, of the same size
    replies = generate_replies(loaded, inputs, max_new_tokens=3, sampling=None)
    assert len(replies.token_ids) == 2 and all(1 <= len(ids) <= 3 for ids in replies.token_ids)
    responses = sample_responses(loaded, inputs, SamplingSetting("t10", temperature=1.0, n=2), max_new_tokens=3, seed=0)
    assert len(responses.texts) == 4
