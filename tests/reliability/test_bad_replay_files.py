"""Bad replay files: the replay names the file, line and reason, or skips and accounts for them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aerorl_ops.replay import cli as replay
from aerorl_ops.replay.reader import iter_replay_records, load_replay, read_replay, read_replay_reference
from aerorl_ops.rewards import evaluate_records, evaluate_table
from aerorl_ops.rewards.replay_lines import ReplayFormatError

GOOD = b'{"id": "good", "response": "stop", "reference": "stop", "metadata": {"latency_ms": 10}}'
BAD_LINES = {
    "invalid_json": (b'{"id": "x", "response": "a"', "not valid JSON: Expecting ',' delimiter (column 28)"),
    "trailing_comma": (b'{"response": "a",}', "not valid JSON: Expecting property name enclosed in double quotes"),
    "lowercase_nan": (b'{"response": "a", "metadata": {"latency_ms": nan}}', "not valid JSON: Expecting value"),
    "array": (b'["response", "a"]', "not a JSON object (found array)"),
    "string": (b'"response"', "not a JSON object (found string)"),
    "missing_response": (b'{"id": "x", "prompt": "p"}', "missing required field 'response'"),
    "metadata_list": (b'{"response": "a", "metadata": ["x"]}', "'metadata' is not a JSON object (found array)"),
    "metadata_null": (b'{"response": "a", "metadata": null}', "'metadata' is not a JSON object (found null)"),
    "invalid_utf8": (b'{"response": "caf\xe9"}', "not valid UTF-8 (byte 18: invalid continuation byte)"),
    "lone_surrogate": (b'{"response": "\\ud83d"}', "a string holds an unpaired UTF-16 surrogate escape"),
    "entities_null": (b'{"response": "a", "metadata": {"claimed_entities": null}}',
                      "'metadata.claimed_entities' is not a list (found null)"),
    "latency_text": (b'{"response": "a", "metadata": {"latency_ms": "fast"}}',
                     "'metadata.latency_ms' is not a number (found string)"),
}


def replay_file(tmp_path: Path, bad: bytes) -> Path:
    """good, blank, good, BAD (line 4), blank, good: 4 non-blank lines."""
    path = tmp_path / "replay.jsonl"
    path.write_bytes(b"\n".join([GOOD, b"", GOOD, bad, b"   ", GOOD]) + b"\n")
    return path


@pytest.mark.parametrize("kind", sorted(BAD_LINES))
def test_replay_fails_naming_file_line_and_reason(tmp_path, capsys, kind):
    bad, reason = BAD_LINES[kind]
    path = replay_file(tmp_path, bad)
    assert replay.main(["--input", str(path), "--quiet"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert f"{path}:4: {reason}" in err
    assert "--skip-invalid" in err


@pytest.mark.parametrize("kind", sorted(BAD_LINES))
def test_both_readers_raise_the_same_error(tmp_path, kind):
    bad, reason = BAD_LINES[kind]
    path = replay_file(tmp_path, bad)
    errors = []
    for read in (read_replay, lambda p: list(iter_replay_records(p))):
        with pytest.raises(ReplayFormatError) as raised:
            read(path)
        errors.append((raised.value.path, raised.value.line_number, raised.value.reason))
    assert errors[0] == errors[1]
    assert errors[0][:2] == (str(path), 4) and errors[0][2].startswith(reason)


@pytest.mark.parametrize("columnar", [False, True], ids=["per-record", "parquet"])
@pytest.mark.parametrize("kind", sorted(BAD_LINES))
def test_skip_invalid_scores_the_rest_and_writes_the_rejects(tmp_path, capsys, kind, columnar):
    bad, reason = BAD_LINES[kind]
    path = replay_file(tmp_path, bad)
    output = tmp_path / "summary.json"
    extra = ["--results-parquet", str(tmp_path / "r.parquet")] if columnar else []
    assert replay.main(["--input", str(path), "--output", str(output), "--skip-invalid", "--quiet", *extra]) == 0
    capsys.readouterr()
    summary = json.loads(output.read_text())
    assert (summary["count"], summary["rejected_count"]) == (3, 1)  # 4 non-blank lines read
    assert summary["average_reward"] == 0.7  # 0.4 verifier + 0.2 format + 0.1 cost
    rejected = [json.loads(line) for line in Path(f"{output}.rejected.jsonl").read_text().splitlines()]
    assert len(rejected) == 1
    assert rejected[0]["line"] == 4 and rejected[0]["reason"].startswith(reason)
    assert rejected[0]["text"] == bad.decode("utf-8", "replace")


def test_rejected_output_path_and_default_next_to_input(tmp_path, capsys):
    path = replay_file(tmp_path, b"oops")
    side = tmp_path / "side.jsonl"
    assert replay.main(["--input", str(path), "--skip-invalid", "--rejected-output", str(side), "--quiet"]) == 0
    assert json.loads(side.read_text())["line"] == 4
    assert replay.main(["--input", str(path), "--skip-invalid", "--quiet"]) == 0
    assert json.loads(Path(f"{path}.rejected.jsonl").read_text())["line"] == 4
    capsys.readouterr()


def test_only_bad_lines_gives_an_empty_summary(tmp_path, capsys):
    path = tmp_path / "all-bad.jsonl"
    path.write_bytes(b"[1]\nnope\n")
    assert replay.main(["--input", str(path), "--skip-invalid", "--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["count"], summary["rejected_count"]) == (0, 2)


def test_bad_lines_among_many_good_ones_keep_scores_identical(tmp_path):
    lines = []
    for index in range(3000):
        record = {"id": f"r{index}", "response": f"answer {index % 7}", "reference": [f"answer {index % 5}"],
                  "metadata": {"evidence_entities": [f"{index % 11}%"], "claimed_entities": [f"0.{index % 11:02d}"],
                               "latency_ms": index % 900}}
        lines.append(json.dumps(record).encode())
    for position, (bad, _) in zip(range(17, 3000, 250), BAD_LINES.values(), strict=False):
        lines[position] = bad
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")

    fast, reference = load_replay(path), read_replay_reference(path)
    assert [(r.line_number, r.reason) for r in fast.rejected] == [(r.line_number, r.reason) for r in reference.rejected]
    assert fast.table.equals(reference.table)
    assert fast.lines_read == 3000 and len(fast.rejected) == len(BAD_LINES)

    per_record = evaluate_records(iter_replay_records(path, skip_invalid=True))
    columnar = evaluate_table(read_replay(path, skip_invalid=True))
    assert columnar["count"] == per_record["count"] == 3000 - len(BAD_LINES)
    per_record_totals = [r["reward"]["total_reward"] for r in per_record["results"]]
    assert columnar["results"].column("total").to_pylist() == per_record_totals
    assert columnar["component_averages"] == per_record["component_averages"]
