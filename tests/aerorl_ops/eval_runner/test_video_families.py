"""A row's video as a video, through each family's own video processor: Qwen2-VL's tensors and its vision-token
mask counting ``<|video_pad|>``, every video family's mask and forward pass (Qwen2-VL, Qwen3-VL, LLaVA-OneVision,
InternVL, SmolVLM2), the frame rate reaching Qwen2.5-VL, SmolVLM2's refusal of a batch mixing video and images,
short training steps (a frozen vision encoder, LoRA, an RL step) on a one-item environment with a video row, a
rollout sampler asked with the row's video, and a vLLM engine's refusal of SmolVLM2's video (vLLM's model of it
takes images only; the engines themselves: ``tests/aerorl_ops/generation/test_vllm_video.py``).

Stock video processors need torchvision (``make setup`` installs it). Frames come from frame files: no PyAV
needed.
"""

from __future__ import annotations

import re

import pytest
import torch
from PIL import Image

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.base import items_at
from aerorl_ops.envs.registry import make_env
from aerorl_ops.envs.types import Observation
from aerorl_ops.eval_runner.episodes import Sampling
from aerorl_ops.eval_runner.replies import encode_observations, observation_prompts
from aerorl_ops.generation.vllm_engine import MediaLimits, check_engine_video
from aerorl_ops.generation.vllm_sampler import VLLMSampler
from aerorl_ops.models.family_parts import part_parameters
from aerorl_ops.models.video_input import VideoMode, VideoRefused, video_mode
from aerorl_ops.rl.runtime.lora import lora_layers
from aerorl_ops.rl.runtime.policy import policy_and_reference
from aerorl_ops.rl.step.prompts import drawn_prompts
from aerorl_ops.rl.step.rollout import sample_parts, supervised_batch
from aerorl_ops.rl.step.sequences import append_completions, completion_logprobs
from aerorl_ops.rl.step.trainer import RLTrainer
from tests.aerorl_ops.rows.video_clips import PALETTE, write_frames

FRAMES = tuple(Image.new("RGB", (56, 56), PALETTE[k]) for k in range(4))
QUESTION = "What colour comes last?"


def video_observation(frames=FRAMES, fps: float | None = 0.5) -> Observation:
    return Observation((), [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": QUESTION}]}],
                       tuple(frames), fps)


def token_id(loaded, text: str) -> int:
    return loaded.tokenizer.convert_tokens_to_ids(text)


def test_qwen2_vl_takes_the_frames_as_one_video(tiny_vlm):
    assert video_mode(tiny_vlm.processor) is VideoMode.VIDEO
    still = Observation((FRAMES[0],), [{"role": "user", "content": [{"type": "image"},
                                                                    {"type": "text", "text": QUESTION}]}])

    (text, _) = observation_prompts(tiny_vlm, [video_observation(), still])
    inputs = encode_observations(tiny_vlm, [video_observation(), still])

    assert "<|vision_start|><|video_pad|><|vision_end|>What colour comes last?" in text
    # 4 frames of 56 x 56, each resized to 112 x 112 (min_pixels): 2 temporal patches x 8 x 8 patches of 14
    assert inputs["video_grid_thw"].tolist() == [[2, 8, 8]] and inputs["image_grid_thw"].tolist() == [[1, 8, 8]]
    assert tuple(inputs["pixel_values_videos"].shape) == (2 * 8 * 8, 3 * 2 * 14 * 14)
    video_pad, image_pad = token_id(tiny_vlm, "<|video_pad|>"), token_id(tiny_vlm, "<|image_pad|>")
    ids = inputs["input_ids"]
    assert (ids == video_pad).sum(dim=1).tolist() == [2 * 8 * 8 // 4, 0]  # 2 x 2 patches merge into one token
    assert (ids == image_pad).sum(dim=1).tolist() == [0, 8 * 8 // 4]
    batch = append_completions(inputs, [[5, 6], [7]], tiny_vlm)
    assert batch.vision_mask.sum(dim=1).tolist() == [32, 16]
    assert torch.equal(batch.vision_mask[0], batch.input_ids[0] == video_pad)
    types = inputs["mm_token_type_ids"]
    assert set(types[ids == video_pad].tolist()) == {2} and set(types[ids == image_pad].tolist()) == {1}


def test_the_model_sees_the_frames_and_their_order(tiny_vlm):
    def scored(frames):
        inputs = encode_observations(tiny_vlm, [video_observation(frames)])
        with torch.no_grad():
            return completion_logprobs(tiny_vlm.model, append_completions(inputs, [[5, 6, 7]], tiny_vlm)).logprobs

    again = scored(FRAMES)
    assert torch.equal(scored(FRAMES), again)
    assert float((scored(FRAMES[::-1]) - again).abs().max()) > 1e-4
    assert float((scored(tuple(Image.new("RGB", (56, 56), (9, 9, 9)) for _ in FRAMES)) - again).abs().max()) > 1e-4


# the vision tokens of 4 frames of 56 x 56: Qwen's 2 temporal patches x 4 x 4 patches / 4 merged; LLaVA-OneVision's
# one pooled token a frame and a newline; InternVL's 4 <IMG_CONTEXT> a frame (its <img> and </img> around them are
# text); SmolVLM2's 4 <image> a frame (its frames' delimiters are text)
@pytest.mark.parametrize(("family", "video_tokens"), [
    ("qwen2-vl", 2 * 4 * 4 // 4), ("qwen3-vl", 2 * 4 * 4 // 4), ("llava-onevision", 4 + 1), ("internvl", 4 * 4),
    ("smolvlm2", 4 * 4)])
def test_each_video_family_takes_the_frames_as_a_video(tiny_family_vlm, family, video_tokens):
    loaded = tiny_family_vlm(family)
    assert video_mode(loaded.processor) is VideoMode.VIDEO
    reply = loaded.tokenizer.encode(" red", add_special_tokens=False)

    def scored(frames):
        batch = append_completions(encode_observations(loaded, [video_observation(frames)]), [reply], loaded)
        with torch.no_grad():
            return batch, completion_logprobs(loaded.model, batch).logprobs

    batch, logprobs = scored(FRAMES)
    assert batch.vision_mask.sum().item() == video_tokens
    assert torch.isfinite(logprobs).all() and logprobs.numel() == len(reply)
    other = scored(tuple(Image.new("RGB", (56, 56), (9, 9, 9)) for _ in FRAMES))[1]
    assert float((other - logprobs).abs().max()) > 1e-5  # the frames reach the model


def test_smolvlm2_refuses_a_batch_mixing_video_and_images(tiny_family_vlm):
    loaded = tiny_family_vlm("smolvlm2")
    still = Observation((FRAMES[0],), [{"role": "user", "content": [{"type": "image"},
                                                                    {"type": "text", "text": QUESTION}]}])
    with pytest.raises(VideoRefused, match=r"\(SmolVLMProcessor\) cannot take video and images in one batch "
                                           r"\(1 video\(s\), 1 image\(s\)\)"):
        encode_observations(loaded, [video_observation(), still])


def test_qwen2_5_vl_times_the_video_by_its_frame_rate(tiny_family_vlm):
    loaded = tiny_family_vlm("qwen2.5-vl")

    slow = encode_observations(loaded, [video_observation(fps=0.5)])
    fast = encode_observations(loaded, [video_observation(fps=2.0)])

    # seconds per temporal patch: temporal_patch_size (2) / frames per second
    assert slow["second_per_grid_ts"].tolist() == [4.0] and fast["second_per_grid_ts"].tolist() == [1.0]


@pytest.fixture(scope="module")
def video_env(tmp_path_factory):
    folder = tmp_path_factory.mktemp("video_env")
    frames = write_frames(folder, 6)
    path = folder / "clips.jsonl"
    path.write_text('{"id": "v1", "question": "Which colour is last in <video>?", "answer": "cyan", '
                    f'"video": {frames!r}, "video_fps": 2}}\n'.replace("'", '"'))
    return make_env("jsonl", path=str(path), fps=2.0, max_frames=4)


def test_the_video_environment_holds_sampled_frame_files(video_env):
    (item,) = video_env.items
    assert len(item.video) == 4 and item.video_fps == pytest.approx(4 / 3)  # 6 frames at 2 fps, capped at 4


def test_a_supervised_step_on_a_video_row_trains_all_but_the_frozen_encoder(tiny_model_dir, video_env):
    settings = TrainingSettings(group_size=2, max_new_tokens=3, kl_coef=0.0, freeze_vision_tower=True, seed=0)
    policy, _ = policy_and_reference(str(tiny_model_dir), settings, device="cpu")
    model = policy.loaded.model
    encoder = set(part_parameters(model, policy.loaded.vision.parts, "encoder"))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    batch = supervised_batch(policy.loaded, video_env, items_at(video_env, [0]))
    assert batch.vision_mask.sum().item() == 2 * 8 * 8 // 4  # 4 frames: 2 temporal patches

    stats = RLTrainer(settings.resolve(), policy).supervised_step(video_env, [0])

    assert torch.isfinite(torch.tensor(stats.loss)) and stats.loss > 0
    after = dict(model.named_parameters())
    assert encoder and all(torch.equal(after[n], before[n]) for n in encoder)
    merger = [n for n in after if n.startswith("model.visual.merger.")]
    assert merger and all(not torch.equal(after[n], before[n]) for n in merger)  # the video reached the projector
    assert all(not torch.equal(after[n], before[n]) for n in after if n not in encoder)


def test_a_reply_sampler_is_asked_with_the_rows_video(tiny_vlm, video_env):
    asked = []

    class RecordingSampler:
        def sample(self, prompts, images, max_new_tokens, sampling, n=1, seed=None, videos=()):
            asked.append((prompts, images, videos, n))
            return [[5, 6]], ["r"], [False]

    sample_parts(tiny_vlm, video_env, [drawn_prompts(video_env, [0])], 3, Sampling(), sampler=RecordingSampler())

    ((prompts, images, videos, n),) = asked
    assert "<|vision_start|><|video_pad|><|vision_end|>" in prompts[0] and images == [()] and n == [1]
    ((frames, fps),) = videos
    assert len(frames) == 4 and fps == pytest.approx(4 / 3)  # the environment's sampled frames and their rate


@pytest.mark.parametrize(("family", "processor", "why"), [
    ("smolvlm2", "SmolVLMProcessor", "vLLM's SmolVLM model (Idefics3) takes images only, no video"),
    ("internvl", "InternVLProcessor", "vLLM's InternVL fills a video's frames with <video> context tokens where "
                                      "transformers' model reads <IMG_CONTEXT>")])
def test_a_vllm_engine_refuses_a_familys_video_in_one_line_before_it_starts(tiny_family_vlm, family, processor, why):
    loaded = tiny_family_vlm(family)
    check_engine_video(loaded.processor, f"tiny-{family}", MediaLimits(images=1, videos=0))  # images only: taken
    with pytest.raises(VideoRefused, match=f"^model tiny-{family} \\({processor}\\) is shown a video, which vLLM "
                                           f"cannot take for it: {re.escape(why)}.*; generate with the transformers "
                                           "backend") as refused:
        check_engine_video(loaded.processor, f"tiny-{family}", MediaLimits(images=1, videos=1))
    assert "\n" not in str(refused.value)
    with pytest.raises(VideoRefused, match=f"^model .* \\({processor}\\) is shown a video"):
        VLLMSampler.start(loaded, limits=MediaLimits(images=1, videos=1))


def test_lora_and_an_rl_step_on_a_video_row(tiny_model_dir, video_env):
    settings = TrainingSettings(group_size=2, max_new_tokens=3, kl_coef=0.0, lora_rank=2, learning_rate=1e-2, seed=1)
    policy, _ = policy_and_reference(str(tiny_model_dir), settings, device="cpu")
    model = policy.loaded.model
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer = RLTrainer(settings.resolve(), policy)

    warmup = trainer.supervised_step(video_env, [0])
    step = trainer.rl_step(video_env, [0])

    assert torch.isfinite(torch.tensor([warmup.loss, step.loss])).all()
    after = dict(model.named_parameters())
    changed = {n for n in after if not torch.equal(after[n], before[n])}
    assert changed and all("lora_" in n for n in changed)  # the base, vision tower included, untouched
    assert not any(".visual." in n for n, _ in lora_layers(model))
