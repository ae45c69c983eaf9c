"""A mixture in the benchmark, end to end on the embedded tiny Qwen2-VL: ``mix_rows`` caches a mixture of an image
part and a text-only part (``kind = "mixture"``, 0.5 / 0.5 of 4), and a benchmark partition generates and scores
every row, the text-only ones without an image, each as dataset ``mix/<part>``: graded by its part's kind and
summarised per source."""

from __future__ import annotations

import json

import dagster as dg
import duckdb
from PIL import Image

from aerorl_pipeline.definitions import build_definitions
from assets.runs import BENCHMARK_RUN_TAG

CONFIG = """
[benchmark]
batch_sizes = [2]
datasets = ["mix"]

[datasets.shapes]
kind = "jsonl"
path = "mix/shapes.jsonl"
split = "test"

[datasets.sums]
kind = "jsonl"
path = "mix/sums.jsonl"
split = "test"
allow_no_image = true

[datasets.mix]
kind = "mixture"
parts = ["shapes", "sums"]
weights = [0.5, 0.5]
limit = 4

[models.tiny]
source = "{source}"
"""


def write_dataset(folder) -> None:
    (folder / "mix").mkdir()
    Image.new("RGB", (112, 112), (255, 0, 0)).save(folder / "mix" / "red.png")
    shapes = [{"id": f"s{n}", "question": "What colour?", "answer": "red", "image": "red.png"} for n in range(2)]
    sums = [{"id": f"q{n}", "question": f"What is {n} + 1?", "answer": str(n + 1)} for n in range(2)]
    for name, lines in (("shapes", shapes), ("sums", sums)):
        (folder / "mix" / f"{name}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_a_mixture_is_one_benchmark_dataset_whose_rows_name_their_source(dagster_env, tiny_model_dir):
    env = dagster_env
    write_dataset(env.root)
    config = env.root / "mix.toml"
    config.write_text(CONFIG.format(source=tiny_model_dir))
    defs = build_definitions(config, resources=env.resources)
    dg.materialize([defs.get_assets_def("mix_rows")], resources=env.resources, instance=env.instance,
                   tags={BENCHMARK_RUN_TAG: "mixture"})
    result = defs.resolve_job_def("benchmark").execute_in_process(
        partition_key=dg.MultiPartitionKey({"model": "tiny", "batch_size": "2"}), instance=env.instance,
        tags={BENCHMARK_RUN_TAG: "mixture"}, run_config={"ops": {"generations": {"config": {"max_new_tokens": 2}}}})
    assert result.success

    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        generations = conn.execute("SELECT sample_id, dataset, image_count, vision_tokens > 0 FROM generations "
                                   "WHERE run_id = 'mixture' ORDER BY sample_id").fetchall()
        rejected = conn.execute("SELECT count(*) FROM rejected_rows WHERE run_id = 'mixture'").fetchone()[0]
        scored = conn.execute("SELECT s.sample_id, s.dataset, s.correct = (lower(trim(g.response)) = "
                              "lower(g.reference[1])) FROM reward_scores s JOIN generations g USING (run_id, "
                              "sample_id, model_key, batch_size) WHERE run_id = 'mixture' ORDER BY sample_id"
                              ).fetchall()
        summary = conn.execute("SELECT dataset, samples FROM benchmark_summary WHERE run_id = 'mixture' "
                               "ORDER BY dataset").fetchall()
    assert generations == [("shapes/s0", "mix/shapes", 1, True), ("shapes/s1", "mix/shapes", 1, True),
                           ("sums/q0", "mix/sums", 0, False), ("sums/q1", "mix/sums", 0, False)]
    assert rejected == 0
    assert scored == [("shapes/s0", "mix/shapes", True), ("shapes/s1", "mix/shapes", True),
                      ("sums/q0", "mix/sums", True), ("sums/q1", "mix/sums", True)]  # exact match: jsonl's grader
    assert summary == [("mix/shapes", 2), ("mix/sums", 2)]
