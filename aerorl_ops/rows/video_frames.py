"""A row's video as still frames: sampled at ``fps`` frames per second of video time, at most ``max_frames``.

A video is either a list of frame files (read by the caller, in order) or a video file decoded with
PyAV (``av``, the ``envs`` extra, imported only when a video file is read). Either way the same rule
picks the frames, from the clip's frame count N and its frame rate R (frames per second):

1. the time grid: sample k is at ``k / fps`` seconds, k = 0, 1, ... while inside the clip; it takes
   frame ``floor(k * R / fps)``, and a frame taken twice (``fps`` above R) is kept once;
2. the cap: when that gives L > ``max_frames`` frames, ``max_frames`` of them are kept, evenly spread
   over the L with both ends kept: sample ``floor(j * (L - 1) / (max_frames - 1))`` for j = 0, 1, ...
   (the first alone when ``max_frames`` is 1).

So a 2 s clip of 10 frames at 5 fps sampled at 1 fps keeps frames 0 and 5; at 2.5 fps, 0, 2, 4, 6, 8;
at 5 fps capped at 4 frames, 0, 3, 6, 9. The rule is integer arithmetic on exact fractions, so the
same clip and settings keep the same frames everywhere. A video file's R is its stream's average
rate; a frame list's is the rate the row says its frames were taken at, else ``fps`` itself (every
listed frame is a sample, then capped). A video file is decoded twice: once to count its frames, once
to keep the sampled ones (as PNG bytes, RGB), so only those are ever held in memory.

``sampled_fps`` is what transformers' ``VideoMetadata.sampled_fps`` means: frames kept per second of
the clip (the kept count over the clip's duration), what a processor times a video's frames by.

A missing file, or a file PyAV cannot open or decode (or that has no video stream or no frame), is a
:class:`VideoProblem` whose message is the row's rejection reason.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import NamedTuple

DEFAULT_FPS = 1.0
"""Frames sampled per second of video time, unless a dataset sets ``fps``."""
DEFAULT_MAX_FRAMES = 8
"""The most frames a row's video keeps, unless a dataset sets ``max_frames``."""
INSTALL_HINT = "reading a video file needs PyAV: pip install 'aerorl-pipeline[envs]' (or pip install av)"


class VideoProblem(Exception):
    """A row's video cannot be read; the message is the rejection reason."""


@dataclass(frozen=True)
class VideoSampling:
    """How a row's frames are chosen (the module docstring's rule).

    >>> VideoSampling(fps=0)
    Traceback (most recent call last):
    ...
    ValueError: video fps must be a positive number of frames per second, got 0
    """

    fps: float = DEFAULT_FPS
    max_frames: int = DEFAULT_MAX_FRAMES

    def __post_init__(self) -> None:
        if isinstance(self.fps, bool) or not isinstance(self.fps, int | float) or not self.fps > 0:
            raise ValueError(f"video fps must be a positive number of frames per second, got {self.fps!r}")
        if isinstance(self.max_frames, bool) or not isinstance(self.max_frames, int) or self.max_frames < 1:
            raise ValueError(f"video max_frames must be a whole number >= 1, got {self.max_frames!r}")


class SampledVideo(NamedTuple):
    """The kept frames (encoded image bytes, in time order) and ``sampled_fps`` (frames kept per second)."""

    frames: tuple[bytes, ...]
    sampled_fps: float


def _exact(rate: float | Fraction) -> Fraction:
    return Fraction(rate).limit_denominator(1_000_000)


def sampled_indices(frame_count: int, source_fps: float | Fraction, sampling: VideoSampling) -> list[int]:
    """Which of ``frame_count`` frames, taken at ``source_fps``, the rule keeps (module docstring).

    >>> [sampled_indices(10, 5, VideoSampling(fps, cap)) for fps, cap in ((1, 8), (2.5, 8), (5, 4), (20, 8))]
    [[0, 5], [0, 2, 4, 6, 8], [0, 3, 6, 9], [0, 1, 2, 3, 5, 6, 7, 9]]
    """
    if frame_count <= 0:
        return []
    step = _exact(source_fps) / _exact(sampling.fps)  # source frames per sample
    grid = list(dict.fromkeys(math.floor(k * step) for k in range(math.ceil(frame_count / step))))
    grid = [index for index in grid if index < frame_count]
    cap = sampling.max_frames
    if len(grid) <= cap:
        return grid
    if cap == 1:
        return grid[:1]
    return [grid[j * (len(grid) - 1) // (cap - 1)] for j in range(cap)]


def sampled_fps(kept: int, frame_count: int, source_fps: float | Fraction) -> float:
    """Frames kept per second of the clip: ``kept`` over the duration of ``frame_count`` frames at ``source_fps``.

    >>> sampled_fps(2, 10, 5), sampled_fps(4, 10, 5)
    (1.0, 2.0)
    """
    return float(kept * _exact(source_fps) / frame_count)


def sample_frame_list(frames: Sequence[bytes], sampling: VideoSampling,
                      source_fps: float | None = None) -> SampledVideo:
    """The frames of a frame list the rule keeps; ``source_fps`` the rate they were taken at (None:
    ``sampling.fps``, every frame a sample).

    >>> sample_frame_list([b"a", b"b", b"c", b"d"], VideoSampling(fps=1, max_frames=2), source_fps=2)
    SampledVideo(frames=(b'a', b'c'), sampled_fps=1.0)
    """
    rate = sampling.fps if source_fps is None else source_fps
    kept = sampled_indices(len(frames), rate, sampling)
    return SampledVideo(tuple(frames[index] for index in kept), sampled_fps(len(kept), len(frames), rate))


def import_av():
    """The ``av`` package (PyAV), or ``ImportError`` saying which extra installs it."""
    try:
        import av
    except ImportError as error:
        raise ImportError(f"{INSTALL_HINT} (import av failed: {error})") from error
    return av


def decode_video(path: str | Path, sampling: VideoSampling) -> SampledVideo:
    """The frames of the video file at ``path`` the rule keeps, as PNG bytes; :class:`VideoProblem` when
    the file is missing or cannot be decoded."""
    av = import_av()
    path = Path(path)
    if not os.path.isfile(path):  # False, not an error, for a name too long
        raise VideoProblem(f"video file not found: {path}")
    try:
        count, rate = _frame_count(av, path)
        if count == 0:
            raise VideoProblem(f"undecodable video: no frame decoded from {path}")
        rate = rate or _exact(sampling.fps)
        kept = sampled_indices(count, rate, sampling)
        frames = _frames_at(av, path, set(kept))
    except (av.error.FFmpegError, OSError, ValueError) as error:  # FFmpeg's errors are ValueErrors
        raise VideoProblem(f"undecodable video: {path} ({type(error).__name__}: {error})") from None
    if len(frames) != len(kept):
        raise VideoProblem(f"undecodable video: {path} gave {len(frames)} of its sampled frames on a second read, "
                           f"expected {len(kept)}")
    return SampledVideo(tuple(frames), sampled_fps(len(kept), count, rate))


def _frame_count(av, path: Path) -> tuple[int, Fraction | None]:
    """How many frames the first video stream of ``path`` decodes to, and its average rate (None: unknown)."""
    with av.open(str(path)) as container:
        if not container.streams.video:
            raise VideoProblem(f"undecodable video: {path} has no video stream")
        stream = container.streams.video[0]
        rate = stream.average_rate or stream.guessed_rate
        count = sum(1 for _ in container.decode(stream))
    return count, (_exact(rate) if rate else None)


def _frames_at(av, path: Path, wanted: set[int]) -> list[bytes]:
    """The frames of ``path``'s first video stream at the ``wanted`` positions, in order, as PNG bytes."""
    frames = []
    with av.open(str(path)) as container:
        for position, frame in enumerate(container.decode(container.streams.video[0])):
            if position in wanted:
                buffer = io.BytesIO()
                frame.to_image().convert("RGB").save(buffer, format="PNG")
                frames.append(buffer.getvalue())
    return frames
