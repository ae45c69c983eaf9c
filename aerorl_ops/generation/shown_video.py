"""A prompt's video as its model is shown it, and the processor keywords that carry it.

A row's video reaches a model one of two ways (``models.video_input.video_mode``): as a video where the
family's processor has a video processor, else as its frames shown as images where the video part was
(``rows.video_messages.frames_as_images``). The benchmark (items, encoded frames), evaluation and training
(environment observations, decoded frames) and the vLLM backends all decide it here, so a video row is
shown the same way everywhere, and a vLLM engine is started for the images and videos its prompts show as
shown (``media_limits``).
"""

from __future__ import annotations

from collections.abc import Sequence

from PIL import Image

from aerorl_ops.generation.vllm_engine import MediaLimits
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.models.video_input import (
    VideoMode,
    check_batch_mix,
    check_video_placeholders,
    video_kwargs,
    video_mode,
)
from aerorl_ops.rows.video_messages import Shown, ShowsVideo, frames_as_images


def shown_videos(loaded: LoadedVLM, prompts: Sequence[Shown]) -> list[Shown]:
    """``prompts`` as ``loaded``'s model is shown them: a video kept where its processor takes video, else its
    frames as images. Prompts without a video are returned as they are."""
    if not any(p.video for p in prompts) or video_mode(loaded.processor) is VideoMode.VIDEO:
        return list(prompts)
    return [frames_as_images(p) for p in prompts]


def media_kwargs(loaded: LoadedVLM, texts: Sequence[str], images: Sequence[Sequence[Image.Image]],
                 videos: Sequence[Sequence[Image.Image]], fps: Sequence[float | None]) -> dict[str, object]:
    """The processor's ``images`` (one list per prompt; None when there are none) and, when a prompt as shown
    (``shown_videos``) keeps a video (``videos[row]``'s frames, ``fps[row]`` kept per second), its ``videos``
    keywords, checked against the video placeholders the chat-templated ``texts`` hold."""
    kwargs: dict[str, object] = {"images": list(images) if any(images) else None}
    if any(videos):
        label = loaded.source.label
        check_batch_mix(loaded.processor, sum(bool(frames) for frames in videos), sum(map(len, images)), label)
        check_video_placeholders(loaded.processor, texts, [1 if frames else 0 for frames in videos], label)
        kwargs.update(video_kwargs(videos, fps))
    return kwargs


def media_limits(shown: Sequence[ShowsVideo], images_per_prompt: int = 1) -> MediaLimits:
    """The most images (at least 1) and videos one of the ``shown`` prompts (as ``shown_videos`` gives them) shows,
    the images times ``images_per_prompt`` (a multi-turn episode's turns): a vLLM engine's limits for them.

    >>> from aerorl_ops.rows.task_item import TaskItem
    >>> still, clip = (TaskItem(n, "d", "test", "f", "Q?", ("a",), images, video=video)
    ...                for n, images, video in (("s", (b"x", b"y"), ()), ("v", (b"x",), (b"f0", b"f1"))))
    >>> media_limits([still]), media_limits([still, clip]), media_limits([])
    (MediaLimits(images=2, videos=0), MediaLimits(images=2, videos=1), MediaLimits(images=1, videos=0))
    """
    images = max([1, *(len(p.images) for p in shown)]) * images_per_prompt
    return MediaLimits(images, int(any(p.video for p in shown)))
