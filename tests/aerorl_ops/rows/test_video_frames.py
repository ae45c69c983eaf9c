"""Video frames: the sampling rule by hand, a tiny PyAV clip decoded (10 solid-colour frames at 5 fps), and
missing or undecodable videos as rejection reasons."""

from __future__ import annotations

import doctest

import pytest

from aerorl_ops.rows import video_frames
from aerorl_ops.rows.video_frames import (
    VideoProblem,
    VideoSampling,
    decode_video,
    sample_frame_list,
    sampled_fps,
    sampled_indices,
)
from tests.aerorl_ops.rows.video_clips import colour_error, frame_png, palette_index, write_clip

pytest.importorskip("av", reason="PyAV (the [envs] extra) decodes video files")


def test_docstring_examples():
    result = doctest.testmod(video_frames, optionflags=doctest.ELLIPSIS)
    assert result.attempted == 4 and result.failed == 0


@pytest.mark.parametrize(("count", "rate", "fps", "cap", "expected"), [
    (10, 5, 1.0, 8, [0, 5]),  # samples at 0 s and 1 s of a 2 s clip
    (10, 5, 2.5, 8, [0, 2, 4, 6, 8]),
    (10, 5, 5.0, 4, [0, 3, 6, 9]),  # 10 on the grid, 4 kept evenly with both ends
    (10, 5, 5.0, 1, [0]),
    (10, 5, 10.0, 20, list(range(10))),  # above the clip's rate: each frame once
    (9, 5, 1.0, 8, [0, 5]),  # 1.8 s: the sample at 2 s is past the end
    (30, 29.97, 1.0, 8, [0, 29]),  # floor(29.97) = 29
    (1, 5, 1.0, 8, [0]),
    (0, 5, 1.0, 8, []),
])
def test_the_sampling_rule(count, rate, fps, cap, expected):
    assert sampled_indices(count, rate, VideoSampling(fps, cap)) == expected


@pytest.mark.parametrize(("fps", "cap"), [(0, 8), (-1.0, 8), (True, 8), ("1", 8), (1.0, 0), (1.0, 2.5)])
def test_sampling_settings_are_checked(fps, cap):
    with pytest.raises(ValueError, match="^video (fps|max_frames) must be"):
        VideoSampling(fps, cap)


def test_a_frame_list_is_taken_at_its_own_rate_or_as_samples():
    frames = [frame_png(k) for k in range(10)]
    taken = sample_frame_list(frames, VideoSampling(fps=1.0, max_frames=8), source_fps=5)
    assert taken.frames == (frames[0], frames[5]) and taken.sampled_fps == 1.0
    every = sample_frame_list(frames, VideoSampling(fps=1.0, max_frames=4))  # no rate: each listed frame a sample
    assert every.frames == (frames[0], frames[3], frames[6], frames[9])
    assert every.sampled_fps == pytest.approx(0.4)  # 4 frames over a 10 s clip
    assert sampled_fps(4, 10, 5) == 2.0


@pytest.mark.parametrize(("fps", "cap", "expected", "rate"), [
    (1.0, 8, [0, 5], 1.0),
    (2.5, 8, [0, 2, 4, 6, 8], 2.5),
    (5.0, 4, [0, 3, 6, 9], 2.0),
])
def test_a_video_file_decodes_to_the_sampled_frames(tmp_path, fps, cap, expected, rate):
    clip = write_clip(tmp_path / "clip.mp4")
    video = decode_video(clip, VideoSampling(fps, cap))
    assert [palette_index(frame) for frame in video.frames] == expected
    assert max(colour_error(frame, k) for frame, k in zip(video.frames, expected, strict=True)) < 12
    assert all(frame.startswith(b"\x89PNG") for frame in video.frames)
    assert video.sampled_fps == pytest.approx(rate)
    assert decode_video(clip, VideoSampling(fps, cap)) == video  # the same frames, byte for byte


def test_missing_or_undecodable_videos_are_problems_not_crashes(tmp_path):
    with pytest.raises(VideoProblem, match=f"^video file not found: {tmp_path / 'none.mp4'}$"):
        decode_video(tmp_path / "none.mp4", VideoSampling())
    garbage = tmp_path / "garbage.mp4"
    garbage.write_bytes(b"\x00\x01 not a video at all" * 10)
    with pytest.raises(VideoProblem, match=f"^undecodable video: {garbage} \\(InvalidDataError: "):
        decode_video(garbage, VideoSampling())
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(write_clip(tmp_path / "whole.mp4").read_bytes()[:40])  # the header, no frame
    with pytest.raises(VideoProblem, match=f"^undecodable video: .*{cut.name}"):
        decode_video(cut, VideoSampling())


def test_a_missing_pyav_names_the_extra(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_av(name, *args, **kwargs):
        if name == "av":
            raise ImportError("No module named 'av'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_av)
    with pytest.raises(ImportError, match=r"^reading a video file needs PyAV: pip install 'aerorl-pipeline\[envs\]'"):
        decode_video("clip.mp4", VideoSampling())
