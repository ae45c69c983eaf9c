"""JSONL rows with a ``video`` (frame files or a PyAV-decoded file): items, messages, observations, settings,
rejections with their reasons, the rows file and the benchmark row; rows without a video unchanged."""

from __future__ import annotations

import doctest
import hashlib
import json
from dataclasses import replace

import pytest

from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.config.fields import ConfigError
from aerorl_ops.envs import video_rows
from aerorl_ops.envs.cached import items_sha256
from aerorl_ops.envs.configured import benchmark_row, dataset_env
from aerorl_ops.envs.registry import env_settings, make_env
from aerorl_ops.envs.types import Observation
from aerorl_ops.rows import video_messages
from aerorl_ops.rows.item_table import items_to_table, table_to_items
from aerorl_ops.rows.task_item import image_sha256
from aerorl_ops.rows.video_messages import frames_as_images
from tests.aerorl_ops.rows.video_clips import PALETTE, frame_png, write_clip, write_frames

pytest.importorskip("av", reason="PyAV (the [envs] extra) decodes video files")


def video_lines(files) -> list[dict]:
    frames = write_frames(files.folder)
    write_clip(files.folder / "clip.mp4")
    files.image("imgs/a.png", (9, 9, 9))
    files.text("garbage.mp4", b"not a video" * 20)
    files.text("frames/broken.png", b"not a png")
    return [
        {"id": "v1", "question": "Which colour comes first in <video>?", "answer": "red", "video": frames,
         "video_fps": 5},
        {"id": "v2", "question": "<image> then what?", "answer": "green", "video": "clip.mp4", "image": "imgs/a.png"},
        {"id": "v3", "question": "Q?", "answer": "x", "video": [frames[0], frames[1], "frames/missing.png"]},
        {"id": "v4", "question": "Q?", "answer": "x", "video": "garbage.mp4"},
        {"id": "v5", "question": "Q?", "answer": "x", "video": "absent.mp4"},
        {"id": "v6", "question": "<video> or <video>?", "answer": "x", "video": frames},
        {"id": "v7", "question": "Q?", "answer": "x", "video": 7},
        {"id": "v8", "question": "Q?", "answer": "x", "video": frames, "video_fps": 0},
        {"id": "v9", "question": "Q?", "answer": "x", "video": [frames[0], "frames/broken.png"]},
        {"id": "v10", "question": "Q?", "answer": "x", "video": "../outside.mp4"},
        {"id": "i1", "question": "What colour is <video> here?", "answer": "grey", "image": "imgs/a.png"},
    ]


def test_video_rows_become_items_and_bad_ones_rejections(tiny_files):
    path = tiny_files.jsonl("clips.jsonl", video_lines(tiny_files))

    env = make_env("jsonl", path=str(path))

    assert [item.item_id for item in env.items] == ["v1", "v2", "i1"]
    first, second, image_only = env.items
    # frames listed at 5 fps, sampled at the default 1 fps: frames 0 and 5 (2 s of video)
    assert first.video == (frame_png(0), frame_png(5)) and first.video_fps == 1.0 and first.images == ()
    assert first.question == "Which colour comes first in ?"
    assert first.messages == ({"role": "user", "content": [
        {"type": "text", "text": "Which colour comes first in "}, {"type": "video"}, {"type": "text", "text": "?"}]},)
    assert len(second.video) == 2 and second.video_fps == 1.0 and second.images == (tiny_files.png((9, 9, 9)),)
    assert [part["type"] for part in second.messages[0]["content"]] == ["video", "image", "text"]
    # a row without a video keeps a "<video>" in its text, as it always did
    assert image_only.video == () and image_only.video_fps is None
    assert image_only.question == "What colour is <video> here?"
    folder = tiny_files.folder
    assert [(row.sample_id, row.reason) for row in env.rejected if row.sample_id not in ("v4", "v9", "v10")] == [
        ("v3", f"video frame 2: image file not found: {folder / 'frames/missing.png'}"),
        ("v5", f"video file not found: {folder / 'absent.mp4'}"),
        ("v6", "text has 2 <video> markers; a row has one video"),
        ("v7", "field 'video' must name a video file or a non-empty list of frame files, got 7"),
        ("v8", "field 'video_fps' must be the frames' rate, a positive number, got 0"),
    ]
    reasons = {row.sample_id: row.reason for row in env.rejected}
    assert reasons["v4"].startswith(f"undecodable video: {folder / 'garbage.mp4'} (InvalidDataError: ")
    assert reasons["v9"].startswith("video frame 1: corrupt image: 9 bytes")
    assert reasons["v10"].startswith("image path '../outside.mp4' leaves the dataset folder")
    assert env.counts == (11, 3, 8)


def test_the_observation_shows_the_frames_in_order(tiny_files):
    env = make_env("jsonl", path=str(tiny_files.jsonl("clips.jsonl", video_lines(tiny_files))))

    _, observation = env.reset(env.items[0])

    assert [frame.getpixel((0, 0)) for frame in observation.video] == [PALETTE[0], PALETTE[5]]
    assert observation.video_fps == 1.0 and observation.images == ()


def test_fps_and_max_frames_are_dataset_settings(tiny_files):
    path = tiny_files.jsonl("clips.jsonl", video_lines(tiny_files))
    assert {"fps", "max_frames"} <= set(env_settings("jsonl"))

    env = make_env("jsonl", path=str(path), fps=5, max_frames=4)

    assert env.items[0].video == tuple(frame_png(k) for k in (0, 3, 6, 9))
    assert env.items[0].video_fps == 2.0  # 4 frames over the 2 s clip
    dataset = DatasetSettings("clips", "jsonl", "train", None, path=str(path), settings={"fps": 0})
    with pytest.raises(ConfigError, match=r"^dataset 'clips' \(kind jsonl, split 'train'\): video fps must be a "
                                          "positive number of frames per second, got 0$"):
        dataset_env(dataset)


def test_rows_without_a_video_hash_as_before(tiny_files):
    tiny_files.image("a.png")
    (item,) = make_env("jsonl", path=str(tiny_files.jsonl("d.jsonl", [
        {"question": "How many?", "answer": 3, "image": "a.png", "id": "q"}]))).items
    before_video = {"item_id": "q", "dataset": "d", "split": "train", "source": item.source, "question": "How many?",
                    "answers": ["3"], "images": [image_sha256(tiny_files.png())],
                    "messages": [{"role": "user", "content": [{"type": "image"},
                                                              {"type": "text", "text": "How many?"}]}],
                    "question_type": None, "evidence_entities": ["3"]}
    expected = hashlib.sha256(json.dumps(before_video, sort_keys=True).encode() + b"\n").hexdigest()
    assert items_sha256([item]) == expected


def test_a_video_row_round_trips_through_a_rows_table_and_is_a_benchmark_row(tiny_files):
    env = make_env("jsonl", path=str(tiny_files.jsonl("clips.jsonl", video_lines(tiny_files))))
    table = items_to_table(env.items)

    assert table_to_items(table) == list(env.items)
    assert table_to_items(table.drop_columns(["video", "video_fps"]))[2] == env.items[2]  # an older file
    assert items_sha256(env.items[:1]) != items_sha256([replace(env.items[0], video=env.items[0].video[:1])])
    row = benchmark_row(env.items[1], "renamed")
    assert row == replace(env.items[1], dataset="renamed")  # its frames as sampled when read, as training's


def test_frames_shown_as_images_take_the_video_part_place():
    observation = Observation(("before", "after"), [{"role": "user", "content": [
        {"type": "image"}, {"type": "text", "text": "then"}, {"type": "video"}, {"type": "image"}]}],
        ("f0", "f1", "f2"), 1.5)

    shown = frames_as_images(observation)

    assert shown.images == ("before", "f0", "f1", "f2", "after")
    assert [part["type"] for part in shown.messages[0]["content"]] == ["image", "text", "image", "image", "image",
                                                                       "image"]
    assert (shown.video, shown.video_fps) == ((), None)
    assert observation.messages[0]["content"][2] == {"type": "video"}  # the observation itself unchanged
    assert frames_as_images(shown) is shown


@pytest.mark.parametrize("module", [video_messages, video_rows])
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
