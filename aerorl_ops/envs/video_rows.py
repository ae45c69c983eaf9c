"""A dataset row's ``video`` field read into its sampled frames (``rows.video_frames``).

``"video": "clip.mp4"`` names a video file, decoded with PyAV; ``"video": ["f0.png", "f1.png", ...]``
names its frames, in time order, taken at the row's ``video_fps`` when it gives one (else every
listed frame is a sample). Paths are relative to the dataset file's folder and stay inside it or its
``image_roots`` (``envs.image_paths``), as image paths do. Every problem (a path leaving the folders,
a missing frame file or video file, an undecodable video, a field of the wrong shape) is a
:class:`~aerorl_ops.rows.video_frames.VideoProblem` whose message is the row's rejection reason.
"""

from __future__ import annotations

from typing import Any

from aerorl_ops.envs.image_paths import ImageFolder
from aerorl_ops.envs.items import ImageFileProblem
from aerorl_ops.rows.video_frames import (
    SampledVideo,
    VideoProblem,
    VideoSampling,
    decode_video,
    sample_frame_list,
)

VIDEO_FIELD = "video"
FRAME_RATE_FIELD = "video_fps"


def row_video(record: dict[str, Any], folder: ImageFolder, sampling: VideoSampling) -> SampledVideo:
    """The frames ``sampling`` keeps of ``record``'s video (module docstring)."""
    value = record.get(VIDEO_FIELD)
    try:
        if isinstance(value, str) and value.strip():
            return decode_video(folder.path(value), sampling)
        if isinstance(value, list) and value and all(isinstance(name, str) and name.strip() for name in value):
            return sample_frame_list(_frame_files(value, folder), sampling, _frame_rate(record))
    except ImageFileProblem as problem:
        raise VideoProblem(str(problem)) from None
    raise VideoProblem(f"field {VIDEO_FIELD!r} must name a video file or a non-empty list of frame files, "
                       f"got {value!r:.80}")


def _frame_files(names: list[str], folder: ImageFolder) -> list[bytes]:
    frames = []
    for position, name in enumerate(names):
        try:
            frames.append(folder.read(name))
        except ImageFileProblem as problem:
            raise VideoProblem(f"video frame {position}: {problem}") from None
    return frames


def _frame_rate(record: dict[str, Any]) -> float | None:
    rate = record.get(FRAME_RATE_FIELD)
    if rate is None:
        return None
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not rate > 0:
        raise VideoProblem(f"field {FRAME_RATE_FIELD!r} must be the frames' rate, a positive number, got {rate!r}")
    return float(rate)
