"""``aerorl replay`` (``aerorl_ops.replay.cli.main``): AeroRL's flags and output, plus ours."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from aerorl_ops.replay import cli as replay

AERORL_EXAMPLE = [
    {"id": "good-ocr", "prompt": "p", "response": '{"answer":"stop"}', "reference": '{"answer":"stop"}',
     "metadata": {"evidence_entities": ["stop"], "claimed_entities": ["stop"], "latency_ms": 72}},
    {"id": "bad-grounding", "prompt": "p", "response": '{"answer":"nike"}', "reference": '{"answer":"adidas"}',
     "metadata": {"evidence_entities": ["adidas"], "claimed_entities": ["nike"], "latency_ms": 340}},
    {"id": "bad-format", "prompt": "p", "response": "The answer is cat", "reference": '{"answer":"cat"}',
     "metadata": {"evidence_entities": ["cat"], "claimed_entities": ["cat"], "latency_ms": 910}},
]
AERORL_FLAGS = ["--require-json", "--regex-pattern", r"^\{.*\}$", "--weight", "verifier=0.45", "--weight",
                "cost=0.05", "--pass-threshold", "0.5", "--top-k", "2"]
METRIC_RECORDS = [
    {"id": "d1", "response": '{"answer": "Pariss"}', "reference": ["Paris"],
     "metadata": {"dataset": "docvqa", "raw_response": "Pariss"}},
    {"id": "c1", "response": "12%", "reference": "0.12", "metadata": {"dataset": "chartqa"}},
    {"id": "c2", "response": "13", "reference": "12", "metadata": {"dataset": "chartqa"}},
    {"id": "o1", "response": "x", "reference": "x", "metadata": {"dataset": "other"}},
]


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def run(argv: list[str], capsys) -> tuple[int, dict | None, str, str]:
    code = replay.main(argv)
    out, err = capsys.readouterr()
    start = out.find("{")
    return code, (json.loads(out[start:]) if code == 0 else None), out[:start], err


def test_reproduces_aerorl_report(tmp_path, capsys):
    source = write(tmp_path / "example.jsonl", AERORL_EXAMPLE)
    output = tmp_path / "summary.json"
    code, summary, brief, _ = run(["--input", str(source), "--output", str(output), *AERORL_FLAGS], capsys)
    assert code == 0
    assert summary["average_reward"] == 0.216333
    assert summary["component_averages"] == {"verifier": 0.0, "grounding": 0.333333, "format": 0.4, "cost": 0.726667}
    assert [(e["id"], e["total_reward"]) for e in summary["worst_examples"]] == [("bad-format", -0.076),
                                                                               ("bad-grounding", -0.275)]
    assert summary["rejected_count"] == 0
    assert json.loads(output.read_text()) == summary
    assert "=== Reward Summary ===" in brief and "average_reward: 0.216333" in brief


def test_quiet_prints_json_only(tmp_path, capsys):
    source = write(tmp_path / "example.jsonl", AERORL_EXAMPLE)
    code, _, brief, err = run(["--input", str(source), "--quiet"], capsys)
    assert (code, brief, err) == (0, "", "")


def test_cost_and_summary_flags_reach_the_scorer(tmp_path, capsys):
    source = write(tmp_path / "example.jsonl", AERORL_EXAMPLE)
    flags = ["--target-tokens", "2", "--latency-budget-ms", "100", "--pass-threshold", "0.9", "--top-k", "1", "--quiet"]
    code, summary, _, _ = run(["--input", str(source), *flags], capsys)
    assert code == 0
    # costs: 1 word in 72 ms -> 1.0; 340 ms -> 1 - 2.4 -> -1.0; 4 words in 910 ms -> 1 - 9.1 -> -1.0
    assert summary["component_averages"]["cost"] == -0.333333
    assert summary["pass_threshold"] == 0.9 and summary["pass_rate"] == 0.333333
    assert len(summary["best_examples"]) == len(summary["worst_examples"]) == 1


@pytest.mark.parametrize(
    ("weight", "message"),
    [("verifier", "expected name=value"), ("verifier=high", "'high' is not a number"),
     ("speed=1", "unknown reward component 'speed'"), ("cost=nan", "weight for 'cost' must be a finite number")],
)
def test_bad_weight_is_a_usage_error(tmp_path, capsys, weight, message):
    source = write(tmp_path / "example.jsonl", AERORL_EXAMPLE)
    code, _, _, err = run(["--input", str(source), "--weight", weight], capsys)
    assert code == 2
    assert message in err


def test_bad_regex_is_a_usage_error(tmp_path, capsys):
    source = write(tmp_path / "example.jsonl", AERORL_EXAMPLE)
    code, _, _, err = run(["--input", str(source), "--regex-pattern", "("], capsys)
    assert code == 2
    assert "--regex-pattern: missing ), unterminated subpattern" in err


def test_missing_input_fails(tmp_path, capsys):
    code, _, _, err = run(["--input", str(tmp_path / "absent.jsonl")], capsys)
    assert code == 1
    assert "absent.jsonl: no such file" in err


def test_results_parquet_holds_the_per_record_scores(tmp_path, capsys):
    source = write(tmp_path / "example.jsonl", AERORL_EXAMPLE)
    parquet = tmp_path / "results.parquet"
    code, summary, _, _ = run(["--input", str(source), "--results-parquet", str(parquet), "--quiet", *AERORL_FLAGS],
                              capsys)
    assert code == 0
    assert "results" not in summary and summary["results_parquet"] == str(parquet)
    assert summary["average_reward"] == 0.216333
    rows = pq.read_table(parquet).to_pylist()
    assert [(row["id"], row["total"], row["cost"]) for row in rows] == [
        ("good-ocr", 1.0, 1.0), ("bad-grounding", -0.275, 1.0), ("bad-format", -0.076, 0.17999999999999994)
    ]


def test_metrics_per_record_and_averaged(tmp_path, capsys):
    source = write(tmp_path / "metrics.jsonl", METRIC_RECORDS)
    code, summary, _, _ = run(["--input", str(source), "--metrics", "--quiet"], capsys)
    assert code == 0
    assert summary["metrics"] == {"anls": {"count": 1, "mean": 0.833333}, "relaxed_accuracy": {"count": 2, "mean": 0.5}}
    assert [r["metrics"] for r in summary["results"]] == [
        {"anls": 0.8333333333333334}, {"relaxed_accuracy": 1.0}, {"relaxed_accuracy": 0.0}, {}
    ]
    assert summary["component_averages"] == run(["--input", str(source), "--quiet"], capsys)[1]["component_averages"]


def test_metrics_columns_in_parquet(tmp_path, capsys):
    source = write(tmp_path / "metrics.jsonl", METRIC_RECORDS)
    parquet = tmp_path / "r.parquet"
    code, summary, _, _ = run(
        ["--input", str(source), "--metrics", "--results-parquet", str(parquet), "--quiet"], capsys)
    assert code == 0
    assert summary["metrics"]["relaxed_accuracy"] == {"count": 2, "mean": 0.5}
    table = pq.read_table(parquet)
    assert table.column("anls").to_pylist() == [0.8333333333333334, None, None, None]
    assert table.column("relaxed_accuracy").to_pylist() == [None, 1.0, 0.0, None]


def test_progress_bar_on_large_inputs_unless_quiet(tmp_path, capsys, monkeypatch):
    source = write(tmp_path / "example.jsonl", AERORL_EXAMPLE)
    monkeypatch.setattr(replay, "PROGRESS_MIN_BYTES", 0)
    # tqdm may redraw the finished bar once more on close, depending on timing: at least one 100%
    assert "100%" in run(["--input", str(source)], capsys)[3]
    assert "100%" in run(["--input", str(source), "--results-parquet", str(tmp_path / "r.parquet")], capsys)[3]
    assert run(["--input", str(source), "--quiet"], capsys)[3] == ""
    monkeypatch.setattr(replay, "PROGRESS_MIN_BYTES", 10**9)
    assert run(["--input", str(source)], capsys)[3] == ""


def test_runs_as_a_module(tmp_path):
    source = write(tmp_path / "example.jsonl", AERORL_EXAMPLE)
    completed = subprocess.run([sys.executable, "-m", "aerorl_ops.replay", "--input", str(source), "--quiet"],
                               capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["count"] == 3
