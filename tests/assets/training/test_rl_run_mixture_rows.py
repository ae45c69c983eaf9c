"""A run on a mixture reads a rows asset per part (``assets.run_rows``): each part as the mixture draws it, cached
by the datasets domain, and the mixture the run draws over those tables holds the same items as one drawn from
the parts' sources."""

from __future__ import annotations

import io
import json

import dagster as dg
from PIL import Image

from aerorl_ops.rl.run.inputs import run_environments
from aerorl_pipeline.definitions import build_definitions
from aerorl_pipeline.stale_rows import refresh_run_rows
from assets.project import load_config
from assets.run_rows import cached_tables, training_rows

CONFIG = """
[benchmark]
batch_sizes = [1]

[models.tiny-qwen2-vl]
source = "embedded:tiny-qwen2-vl"

[datasets.shapes]
kind = "jsonl"
path = "shapes.jsonl"
split = "train"

[datasets.sums]
kind = "jsonl"
path = "sums.jsonl"
split = "train"
allow_no_image = true

[datasets.mix]
kind = "mixture"
parts = ["shapes", "sums"]
weights = [0.5, 0.5]
limit = 6

[training]
env = "mix"
train_limit = 6
eval_size = 2
sampled_eval_size = 0
"""
PART_KEYS = {"training/shapes": dg.AssetKey(["training", "train_rows", "shapes"]),
             "training/sums": dg.AssetKey(["training", "train_rows", "sums"]),
             "held_out/shapes": dg.AssetKey(["training", "held_out_rows", "shapes"]),
             "held_out/sums": dg.AssetKey(["training", "held_out_rows", "sums"])}


def png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (28, 28), (255, 0, 0)).save(buffer, format="PNG")
    return buffer.getvalue()


def test_a_mixture_run_reads_a_rows_asset_per_part_and_draws_the_same_items_over_them(tmp_path, dagster_env_factory):
    (tmp_path / "bench.toml").write_text(CONFIG)
    (tmp_path / "red.png").write_bytes(png())
    (tmp_path / "shapes.jsonl").write_text("".join(json.dumps({"id": f"s{n}", "question": f"Colour {n}?",
                                                               "answer": "red", "image": "red.png"}) + "\n"
                                                   for n in range(8)))
    (tmp_path / "sums.jsonl").write_text("".join(json.dumps({"id": f"t{n}", "question": f"{n} + 1?",
                                                             "answer": str(n + 1)}) + "\n" for n in range(8)))
    env = dagster_env_factory(tmp_path)
    bench = load_config(tmp_path / "bench.toml")
    rows = training_rows(bench)
    assert {stage: run_rows.key for stage, run_rows in rows.items()} == PART_KEYS
    assert {stage: (run_rows.dataset.limit, run_rows.dataset.seed) for stage, run_rows in rows.items()} == {
        "training/shapes": (3, 1000 + bench.seed), "training/sums": (3, 1000 + bench.seed),
        "held_out/shapes": (1, 0), "held_out/sums": (1, 0)}
    defs = build_definitions(bench, env.resources)
    assert set(defs.get_assets_def(dg.AssetKey("rl_run")).dependency_keys) >= set(PART_KEYS.values())
    assert refresh_run_rows(defs, env.instance, rows.values()) == list(PART_KEYS.values())
    cached = cached_tables(env.resources["io_manager"], {stage: run_rows.key for stage, run_rows in rows.items()})
    seed = bench.seed + bench.training.seed
    over_cache = run_environments(bench.training, seed, bench.datasets, cached)
    from_sources = run_environments(bench.training, seed, bench.datasets)
    for stage in ("training", "held_out"):
        assert over_cache.inputs[stage].cached and not from_sources.inputs[stage].cached
        assert over_cache.inputs[stage].content_sha256 == from_sources.inputs[stage].content_sha256
    env.instance.dispose()
