"""A benchmark partition with video rows, end to end (rows -> generations -> reward_scores -> DuckDB): a JSONL
dataset whose rows show a video (6 frame files listed at 2 fps, sampled at the dataset's 2 fps and capped at 4,
as training samples them), a video and an image, and an image alone.

On the embedded tiny Qwen2-VL the processor takes the frames as one video: 4 frames of 32 x 32 px resized to
112 x 112 are 2 temporal patches x 8 x 8 patches of 14 px, merged 2 x 2: 32 ``<|video_pad|>`` tokens; a 112 x
112 image 16 ``<|image_pad|>``. The tiny LLaVA's processor has no video processor: the frames are shown as 4
more images, 4 tokens each, as its one image is.
"""

from __future__ import annotations

import json

import dagster as dg
import duckdb
import pytest
from PIL import Image

from aerorl_pipeline.definitions import build_definitions
from assets.runs import BENCHMARK_RUN_TAG
from tests.aerorl_ops.rows.video_clips import write_frames

CONFIG = """
[benchmark]
batch_sizes = [2]

[datasets.clips]
kind = "jsonl"
path = "clips/q.jsonl"
split = "test"
fps = 2
max_frames = 4

[models.{key}]
source = "{source}"
"""
QWEN_VIDEO_TOKENS, QWEN_IMAGE_TOKENS = 2 * 8 * 8 // 4, 8 * 8 // 4
LLAVA_IMAGE_TOKENS = 4


def write_dataset(folder) -> None:
    clips = folder / "clips"
    frames = write_frames(clips, 6)
    Image.new("RGB", (112, 112), (255, 0, 0)).save(clips / "red.png")
    lines = [{"id": "clip", "question": "Which colour is last in <video>?", "answer": "cyan", "video": frames,
              "video_fps": 2},
             {"id": "both", "question": "<image> is red; is it in <video>?", "answer": "yes", "image": "red.png",
              "video": frames, "video_fps": 2},
             {"id": "still", "question": "What colour?", "answer": "red", "image": "red.png"}]
    (clips / "q.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def run_partition(env, key: str, source) -> list[tuple]:
    write_dataset(env.root)
    config = env.root / "clips.toml"
    config.write_text(CONFIG.format(key=key, source=source))
    defs = build_definitions(config, resources=env.resources)
    dg.materialize([defs.get_assets_def("clips_rows")], resources=env.resources, instance=env.instance,
                   tags={BENCHMARK_RUN_TAG: "video"})
    result = defs.resolve_job_def("benchmark").execute_in_process(
        partition_key=dg.MultiPartitionKey({"model": key, "batch_size": "2"}), instance=env.instance,
        tags={BENCHMARK_RUN_TAG: "video"}, run_config={"ops": {"generations": {"config": {"max_new_tokens": 2}}}})
    assert result.success
    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        generations = conn.execute(
            "SELECT sample_id, image_count, video_frames, vision_tokens, batch_index, prompt "
            "FROM generations WHERE run_id = 'video' AND model_key = ? ORDER BY sample_id", [key]).fetchall()
        rejected = conn.execute("SELECT count(*) FROM rejected_rows WHERE run_id = 'video'").fetchone()[0]
        scored = conn.execute("SELECT sample_id FROM reward_scores WHERE run_id = 'video' AND model_key = ? "
                              "ORDER BY sample_id", [key]).fetchall()
    assert rejected == 0 and scored == [("both",), ("clip",), ("still",)]
    return generations


@pytest.mark.slow
def test_qwen2_vl_takes_a_video_rows_frames_as_one_video(dagster_env, tiny_model_dir):
    generations = run_partition(dagster_env, "tiny", tiny_model_dir)

    assert [row[:4] for row in generations] == [
        ("both", 1, 4, QWEN_VIDEO_TOKENS + QWEN_IMAGE_TOKENS),
        ("clip", 0, 4, QWEN_VIDEO_TOKENS),
        ("still", 1, 0, QWEN_IMAGE_TOKENS)]
    # the two video rows are one batch, the image row the next: no batch mixes video and image-only rows
    assert [row[4] for row in generations] == [0, 0, 1]
    assert generations[1][5] == "Which colour is last in ?"  # its question's text, the video at its marker


@pytest.mark.slow
def test_llava_is_shown_a_video_rows_frames_as_images(dagster_env, tiny_family_dir):
    generations = run_partition(dagster_env, "llava", tiny_family_dir("llava"))

    assert [row[:4] for row in generations] == [
        ("both", 1, 4, (1 + 4) * LLAVA_IMAGE_TOKENS),
        ("clip", 0, 4, 4 * LLAVA_IMAGE_TOKENS),
        ("still", 1, 0, LLAVA_IMAGE_TOKENS)]
