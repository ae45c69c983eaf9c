"""How a model takes a row's video: as a video, or as still images.

- ``VIDEO``: the processor has a video processor (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5, LLaVA-OneVision,
  SmolVLM2, InternVL, GLM-4.1V, Gemma 4, ERNIE 4.5-VL; transformers' video processors need torchvision).
  Its frames go to the processor as ``videos=`` with their ``VideoMetadata`` (the frames kept per
  second, every frame already sampled: ``do_sample_frames=False``), and its chat template writes the
  video placeholder the processor expands into video tokens (Qwen's ``<|video_pad|>``), which the
  vision-token mask counts (``models.vision_tokens``). The video goes through the same vision tower as
  images, so a frozen tower or LoRA treats it as it treats images.
- ``IMAGES``: the family's processor has no video processor (Gemma 3, LLaVA, Idefics3, PaliGemma...):
  the frames are shown as images (``rows.video_messages.frames_as_images``).

A batch a family's model cannot take (video and images together, ``check_batch_mix``) is refused in one line
(:class:`VideoRefused`).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from PIL import Image


class VideoRefused(ValueError):
    """The model cannot be shown this video here."""


class VideoMode(Enum):
    VIDEO = "video"
    IMAGES = "images"


def video_mode(processor) -> VideoMode:
    """How ``processor``'s model takes a video (module docstring)."""
    return VideoMode.VIDEO if getattr(processor, "video_processor", None) is not None else VideoMode.IMAGES


def video_kwargs(videos: Sequence[Sequence[Image.Image]], fps: Sequence[float | None]) -> dict[str, object]:
    """The processor keywords of a batch's videos: per prompt, its video's frames (empty: none) and their
    frames kept per second (None: the processor's default rate). Each prompt gets a list of its videos, as
    SmolVLM's processor needs; the others flatten it."""
    from transformers.video_utils import VideoMetadata

    metadata = [[VideoMetadata(total_num_frames=len(frames), fps=rate, frames_indices=list(range(len(frames))))]
                if frames else [] for frames, rate in zip(videos, fps, strict=True)]
    return {"videos": [[list(frames)] if frames else [] for frames in videos], "video_metadata": metadata,
            "do_sample_frames": False}


VIDEO_ONLY_BATCHES = ("SmolVLMProcessor", "Glm4vProcessor")
"""Processors whose model cannot take a batch mixing video rows and image rows: SmolVLM2's puts a video's
frames in ``pixel_values`` beside the images, GLM-4.1V's model counts video frames as image tokens."""


def check_batch_mix(processor, videos: int, images: int, model: str = "the model") -> None:
    """:class:`VideoRefused` when ``processor`` (of ``VIDEO_ONLY_BATCHES``) gets ``videos`` and ``images`` in one
    batch."""
    family = next((cls.__name__ for cls in type(processor).__mro__ if cls.__name__ in VIDEO_ONLY_BATCHES), None)
    if family is not None and videos and images:
        raise VideoRefused(f"model {model} ({family}) cannot take video and images in one batch ({videos} video(s), "
                           f"{images} image(s)): train it on video rows and image rows in separate datasets")


def check_video_placeholders(processor, texts: Sequence[str], videos: Sequence[int], model: str = "the model") -> None:
    """A ``ValueError`` when the chat-templated ``texts`` do not hold ``videos[row]`` video placeholders each
    (the processor's ``video_token``): a chat template that writes nothing for a video part."""
    token = getattr(processor, "video_token", None)
    if not isinstance(token, str):
        return
    for row, (text, expected) in enumerate(zip(texts, videos, strict=True)):
        if text.count(token) != expected:
            raise ValueError(f"the chat template of model {model} wrote {text.count(token)} video placeholder(s) "
                             f"{token!r} for {expected} video(s) in prompt {row}: its template does not render "
                             "{'type': 'video'} parts; give the model a chat template that does")
