"""A row's video through a model's processor: as images for a family without a video processor. The video path
itself (Qwen2-VL's ``videos=``): ``test_video_qwen.py``."""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from aerorl_ops.envs.types import Observation
from aerorl_ops.eval_runner.replies import encode_observations, observation_prompts
from aerorl_ops.models.video_input import VideoMode, video_kwargs, video_mode
from aerorl_ops.models.vision_tokens import vision_token_mask
from aerorl_ops.rl.step.multi_turn import env_turn
from aerorl_ops.rl.step.sequences import append_completions
from tests.aerorl_ops.rows.video_clips import PALETTE

FRAMES = tuple(Image.new("RGB", (56, 56), PALETTE[k]) for k in range(3))


def video_observation(question: str = "What colour comes last?") -> Observation:
    return Observation((), [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": question}]}],
                       FRAMES, 1.0)


def images_observation(question: str = "What colour comes last?") -> Observation:
    return Observation(FRAMES, [{"role": "user", "content": [*({"type": "image"} for _ in FRAMES),
                                                             {"type": "text", "text": question}]}])


@pytest.mark.parametrize(("family", "tokens_per_image"), [("llava", 4), ("gemma3", 4)])
def test_a_family_without_a_video_processor_is_shown_the_frames_as_images(tiny_family_vlm, family, tokens_per_image):
    loaded = tiny_family_vlm(family)
    assert video_mode(loaded.processor) is VideoMode.IMAGES

    shown = encode_observations(loaded, [video_observation()])
    explicit = encode_observations(loaded, [images_observation()])

    assert observation_prompts(loaded, [video_observation()]) == observation_prompts(loaded, [images_observation()])
    assert shown.keys() == explicit.keys() and "pixel_values_videos" not in shown
    for name in shown:
        assert torch.equal(shown[name], explicit[name]), name
    assert tuple(shown["pixel_values"].shape[:1]) == (3,)
    batch = append_completions(shown, [[5, 6]], loaded)
    assert batch.vision_mask.sum().item() == 3 * tokens_per_image


def test_mixed_batches_keep_each_row_s_images_in_place(tiny_family_vlm):
    loaded = tiny_family_vlm("llava")
    still = Observation((Image.new("RGB", (56, 56), (7, 7, 7)),), [{"role": "user", "content": [
        {"type": "image"}, {"type": "text", "text": "And this?"}]}])

    inputs = encode_observations(loaded, [video_observation(), still])

    mask = vision_token_mask(inputs["input_ids"], loaded.vision.token_ids)
    assert mask.sum(dim=1).tolist() == [12, 4]
    assert torch.equal(inputs["pixel_values"][3], encode_observations(loaded, [still])["pixel_values"][0])


def test_a_later_environment_turn_with_a_video_is_refused():
    with pytest.raises(ValueError, match="^an environment turn after the first shows a video; only an episode's "
                                         "first turn may"):
        env_turn(None, video_observation())


def test_video_keywords_carry_the_frame_rate():
    kwargs = video_kwargs([FRAMES, (), FRAMES[:2]], [0.5, None, None])

    assert kwargs["do_sample_frames"] is False
    assert [[len(video) for video in row] for row in kwargs["videos"]] == [[3], [], [2]]  # per prompt, its videos
    [first], [], [second] = kwargs["video_metadata"]
    assert (first.total_num_frames, first.fps, first.frames_indices, first.sampled_fps) == (3, 0.5, [0, 1, 2], 0.5)
    assert (second.total_num_frames, second.fps) == (2, None)
