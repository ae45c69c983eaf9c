"""`aerorl eval` on a mixture (issue 34, item 5): the printed table and `eval_metrics` / `eval_comparisons` report
accuracy per source dataset. The yes-sayer (tests/conftest.py) answers "yes" to every question, the tiny model
never answers in one word, so each source's accuracies are known from the answers alone."""

from __future__ import annotations

import json

import duckdb
import pytest
from PIL import Image

from aerorl_pipeline import cli

SHAPES = ["yes", "no", "yes", "yes"]  # the yes-sayer gets 3 of 4
TEXTS = ["yes", "no", "no"]  # 1 of 3


@pytest.fixture
def config(tmp_path, tiny_model_dir):
    Image.new("RGB", (2, 2), (255, 0, 0)).save(tmp_path / "red.png")
    (tmp_path / "shapes.jsonl").write_text("".join(
        json.dumps({"id": f"s{n}", "question": f"Is shape {n} red?", "answer": answer, "image": "red.png"}) + "\n"
        for n, answer in enumerate(SHAPES)))
    (tmp_path / "texts.jsonl").write_text("".join(
        json.dumps({"id": f"t{n}", "question": f"Is {n} even?", "answer": answer}) + "\n"
        for n, answer in enumerate(TEXTS)))
    path = tmp_path / "eval.toml"
    path.write_text(f"""
[benchmark]
batch_sizes = [1]

[models.tiny]
source = "{tiny_model_dir}"

[datasets.shapes]
kind = "jsonl"
path = "shapes.jsonl"

[datasets.texts]
kind = "jsonl"
path = "texts.jsonl"
allow_no_image = true

[datasets.mix]
kind = "mixture"
parts = ["shapes", "texts"]
weights = [1, 1]
limit = 7

[eval]
model = "tiny"
baseline = "tiny"
dataset = "mix"
""")
    return path


def test_an_eval_of_a_mixture_reports_each_source(config, tmp_path, capsys, monkeypatch, yes_model_dir):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    database = tmp_path / "reports" / "aerorl.duckdb"
    argv = ["eval", "--config", str(config), "--database", str(database), "--model", str(yes_model_dir),
            "--n", "7", "--samples", "2", "--k", "2", "--max-new-tokens", "3", "--greedy", "--eval-id",
            "mix-eval"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "metric" in line)
    assert header.split() == ["setting", "type", "source", "metric", "model", "baseline", "difference", "95%", "CI",
                              "method"]
    texts = next(line for line in out.splitlines() if line.split()[:4] == ["greedy_pass1", "all", "texts", "pass@1"])
    assert texts.split()[4:7] == ["0.3333", "0.0000", "+0.3333"]
    with duckdb.connect(str(database), read_only=True) as conn:
        metrics = conn.execute("SELECT source, questions, n_correct, accuracy FROM eval_metrics WHERE role = 'model' "
                               "AND setting = 'greedy_pass1' AND question_type = 'all' ORDER BY rowid").fetchall()
        compared = conn.execute("SELECT source, questions, b, c, method FROM eval_comparisons WHERE setting = "
                                "'greedy_pass1' AND question_type = 'all' ORDER BY rowid").fetchall()
        samples = conn.execute("SELECT source, count(*) FROM eval_samples WHERE role = 'model' AND setting = "
                               "'greedy_pass1' GROUP BY ALL ORDER BY ALL").fetchall()
    assert metrics == [("all", 7, 4, pytest.approx(4 / 7)), ("shapes", 4, 3, 0.75),
                       ("texts", 3, 1, pytest.approx(1 / 3))]
    assert compared == [("all", 7, 4, 0, "mcnemar_exact"), ("shapes", 4, 3, 0, "mcnemar_exact"),
                        ("texts", 3, 1, 0, "mcnemar_exact")]
    assert samples == [("shapes", 4), ("texts", 3)]
