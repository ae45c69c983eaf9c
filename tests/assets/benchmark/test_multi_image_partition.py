"""A benchmark partition of rows with several images, end to end on the embedded tiny Qwen2-VL: a JSONL
dataset with ``max_images = 2`` whose rows show one, two and three images (``<image>`` markers place
them). The three-image row lands in ``rejected_rows`` with its reason; the others in ``generations`` with
their image count and every image's vision tokens (16 per 112 x 112 image: 8 x 8 patches of 14 px,
merged 2 x 2), then in ``reward_scores``."""

from __future__ import annotations

import json

import dagster as dg
import duckdb
from PIL import Image

from aerorl_pipeline.definitions import build_definitions
from assets.runs import BENCHMARK_RUN_TAG

TOKENS_PER_IMAGE = 16
CONFIG = """
[benchmark]
batch_sizes = [2]

[datasets.pairs]
kind = "jsonl"
path = "pairs/q.jsonl"
split = "test"
max_images = 2

[models.tiny]
source = "{source}"
"""


def write_dataset(folder) -> None:
    (folder / "pairs").mkdir()
    for name, colour in (("red", (255, 0, 0)), ("blue", (0, 0, 255)), ("green", (0, 255, 0))):
        Image.new("RGB", (112, 112), colour).save(folder / "pairs" / f"{name}.png")
    lines = [{"id": "one", "question": "What colour?", "answer": "red", "image": "red.png"},
             {"id": "two", "question": "Left <image>, right <image>: same colour?", "answer": "no",
              "image": ["red.png", "blue.png"]},
             {"id": "three", "question": "Which is green?", "answer": "third",
              "image": ["red.png", "blue.png", "green.png"]}]
    (folder / "pairs" / "q.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_a_partition_records_each_rows_images_and_rejects_a_row_over_max_images(dagster_env, tiny_model_dir):
    env = dagster_env
    write_dataset(env.root)
    config = env.root / "pairs.toml"
    config.write_text(CONFIG.format(source=tiny_model_dir))
    defs = build_definitions(config, resources=env.resources)
    dg.materialize([defs.get_assets_def("pairs_rows")], resources=env.resources, instance=env.instance,
                   tags={BENCHMARK_RUN_TAG: "multi-image"})
    result = defs.resolve_job_def("benchmark").execute_in_process(
        partition_key=dg.MultiPartitionKey({"model": "tiny", "batch_size": "2"}), instance=env.instance,
        tags={BENCHMARK_RUN_TAG: "multi-image"}, run_config={"ops": {"generations": {"config": {"max_new_tokens": 2}}}})
    assert result.success

    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        generations = conn.execute("SELECT sample_id, image_count, vision_tokens, prompt FROM generations "
                                   "WHERE run_id = 'multi-image' ORDER BY sample_id").fetchall()
        rejected = conn.execute("SELECT sample_id, reason FROM rejected_rows WHERE run_id = 'multi-image'").fetchall()
        scored = conn.execute("SELECT sample_id FROM reward_scores WHERE run_id = 'multi-image' "
                              "ORDER BY sample_id").fetchall()
    assert [row[:3] for row in generations] == [("one", 1, TOKENS_PER_IMAGE), ("two", 2, 2 * TOKENS_PER_IMAGE)]
    assert generations[1][3] == "Left , right : same colour?"  # its question's text, the images at the markers
    assert rejected == [("three", "item 'three' has 3 images, max_images = 2")]
    assert scored == [("one",), ("two",)]
