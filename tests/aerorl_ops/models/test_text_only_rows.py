"""Text-only rows (a mixture's text part, ``envs.mixture``) on every family's tiny checkpoint: a row without an
image beside one with an image gets no vision token and is scored as ``generate`` sampled it; a batch of text
rows alone is answered; a family that cannot take them (``models.text_only.TEXT_ONLY_REFUSALS``) refuses them
in one line, and its stock processor or model does fail on them."""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from aerorl_ops.envs.types import Observation
from aerorl_ops.eval_runner.episodes import generate_replies
from aerorl_ops.eval_runner.replies import encode_observations, observation_prompts
from aerorl_ops.models.text_only import TEXT_ONLY_REFUSALS, TextOnlyRowError, text_only_refusal
from aerorl_ops.rl.step.sequences import append_completions, completion_logprobs
from tests.aerorl_ops.models.family_params import family_params
from tests.aerorl_ops.rl.run.test_family_training import generated_with_logprobs


def observation(with_image: bool) -> Observation:
    content = [*([{"type": "image"}] if with_image else []), {"type": "text", "text": "What is 2 + 2?"}]
    images = (Image.new("RGB", (96, 64), (200, 0, 0)),) if with_image else ()
    return Observation(images=images, messages=[{"role": "user", "content": content}])


def refuses(loaded) -> bool:
    return text_only_refusal(loaded.processor) is not None


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


@pytest.mark.parametrize("name", family_params())
def test_a_text_row_beside_an_image_row_has_no_vision_token_and_is_scored_as_generated(tiny_family_vlm, name):
    loaded = tiny_family_vlm(name)
    if refuses(loaded):
        with pytest.raises(TextOnlyRowError):
            encode_observations(loaded, [observation(True), observation(False)])
        if name == "mllama":  # the table is true: its model fails on the stock processor's output
            texts = observation_prompts(loaded, [observation(True), observation(False)])
            inputs = loaded.processor(text=texts, images=[[observation(True).images[0]], []], return_tensors="pt",
                                      padding=True)
            with pytest.raises(RuntimeError, match="invalid for input of size"):
                loaded.model(**inputs)
        return
    inputs = encode_observations(loaded, [observation(True), observation(False)])
    tokens, expected = generated_with_logprobs(loaded, inputs)
    batch = append_completions(inputs, tokens, loaded)
    counts = batch.vision_mask.sum(dim=1).tolist()
    assert counts[0] > 0 and counts[1] == 0
    with torch.no_grad():
        scored = completion_logprobs(loaded.model, batch).logprobs  # [N]
    assert torch.allclose(scored, torch.cat(expected), atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", family_params())
def test_text_rows_alone_are_answered_or_refused_in_one_line(tiny_family_vlm, name):
    loaded = tiny_family_vlm(name)
    rows = [observation(False), observation(False)]
    if refuses(loaded):
        if name == "paligemma":  # the table is true: the stock processor refuses them
            with pytest.raises(ValueError):
                loaded.processor(text=observation_prompts(loaded, rows), images=None, return_tensors="pt",
                                 padding=True)
        with pytest.raises(TextOnlyRowError) as refused:
            encode_observations(loaded, rows)
        line = str(refused.value)
        assert line.startswith(f"model {loaded.source.label}: a row shows no image (2 of 2 in this batch)")
        assert "\n" not in line
        return
    inputs = encode_observations(loaded, rows)
    replies = generate_replies(loaded, inputs, max_new_tokens=2, sampling=None)
    assert len(replies.token_ids) == 2 and all(1 <= len(ids) <= 2 for ids in replies.token_ids)


def test_only_paligemma_and_llama_3_2_visions_torchvision_processor_refuse_text_rows():
    assert sorted(TEXT_ONLY_REFUSALS) == ["MllamaImageProcessor", "PaliGemmaProcessor"]
