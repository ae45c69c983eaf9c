"""`aerorl eval` on questions with two images each (a JSONL dataset, ``<image>`` markers), the tiny model
against itself: every question answered at every setting, and a question over ``max_images`` recorded as a
rejection with its reason."""

from __future__ import annotations

import json

import duckdb
from PIL import Image

from aerorl_pipeline import cli


def test_an_eval_of_two_image_questions_answers_each_and_rejects_one_over_max_images(tmp_path, capsys, monkeypatch,
                                                                                    tiny_model_dir):
    folder = tmp_path / "pairs"
    folder.mkdir()
    for name, colour in (("red", (255, 0, 0)), ("blue", (0, 0, 255)), ("green", (0, 255, 0))):
        Image.new("RGB", (112, 112), colour).save(folder / f"{name}.png")
    pairs = [("red", "red"), ("red", "blue"), ("blue", "blue")]
    lines = [{"id": f"p{n}", "question": "Left <image>, right <image>: same colour?",
              "answer": "yes" if left == right else "no", "image": [f"{left}.png", f"{right}.png"]}
             for n, (left, right) in enumerate(pairs)]
    lines.append({"id": "three", "question": "Which is green?", "answer": "right",
                  "image": ["red.png", "blue.png", "green.png"]})
    (folder / "q.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    config = tmp_path / "eval.toml"
    config.write_text(f"""
[benchmark]
batch_sizes = [1]

[models.tiny]
source = "{tiny_model_dir}"

[datasets.pairs]
kind = "jsonl"
path = "pairs/q.jsonl"
split = "test"
max_images = 2

[eval]
model = "tiny"
baseline = "tiny"
""")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    database = tmp_path / "reports" / "aerorl.duckdb"
    argv = ["eval", "--config", str(config), "--database", str(database), "--dataset", "pairs", "--n", "4",
            "--samples", "2", "--k", "2", "--max-new-tokens", "2", "--eval-id", "pairs-test"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr()
    assert printed.out.startswith("eval pairs-test: tiny vs baseline tiny on 3 questions of pairs (test)")
    assert printed.err == "aerorl: dataset 'pairs': 1 row rejected: item has 3 images, max_images = 2 (1)\n"
    with duckdb.connect(str(database), read_only=True) as conn:
        answered = conn.execute("SELECT role, setting, count(DISTINCT item_id), count(*) FROM eval_samples "
                                "WHERE eval_id = 'pairs-test' GROUP BY ALL ORDER BY ALL").fetchall()
        rejected = conn.execute("SELECT sample_id, reason FROM rejected_rows WHERE run_id = 'pairs-test'").fetchall()
    per_setting = {setting: (items, rows) for _, setting, items, rows in answered}
    assert {items for items, _ in per_setting.values()} == {3} and len(answered) == 2 * len(per_setting)
    assert rejected == [("three", "item 'three' has 3 images, max_images = 2")]
