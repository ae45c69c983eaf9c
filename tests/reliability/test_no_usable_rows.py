"""A dataset whose every row is bad is refused in one line naming it, its file and its top reasons:
``aerorl eval`` exits 2 before any model loads, instead of a Dagster traceback."""

from __future__ import annotations

import json

from aerorl_pipeline.cli import main


def test_aerorl_eval_on_a_dataset_with_no_usable_row_exits_2_in_one_line(tmp_path, capsys):
    path = tmp_path / "shapes.jsonl"
    lines = [{"id": "a", "question": "Colour?", "answer": "red", "image": "missing.png"},
             {"id": "b", "question": "Colour?", "answer": "red", "image": "../../../../../../etc/passwd"},
             {"id": "c", "question": "Colour?", "image": "missing.png"}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    config = tmp_path / "bench.toml"
    config.write_text('[benchmark]\nbatch_sizes = [1]\n\n[datasets.shapes]\nkind = "jsonl"\npath = "shapes.jsonl"\n\n'
                      '[models.tiny-qwen2-vl]\nsource = "embedded:tiny-qwen2-vl"\n')
    code = main(["eval", "--config", str(config), "--dataset", "shapes", "--database", str(tmp_path / "r.duckdb")])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err == (
        f"aerorl: configuration error: dataset 'shapes' (file {path}) has no usable row: all 3 rows read were "
        "rejected: image file not found (2), image path leaves the dataset folder (1); the first, "
        f"{path}#line=1: image file not found: {tmp_path / 'missing.png'}. Fix the rows, or point the dataset at "
        "another file\n")
    assert not (tmp_path / "r.duckdb").exists()
