"""The fast (DuckDB) replay reader agrees line for line with the reference reader."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aerorl_ops.replay.fast_reader import read_fast
from aerorl_ops.replay.reader import iter_replay_records, load_replay, read_replay, read_replay_reference
from aerorl_ops.rewards.replay_lines import REPLAY_SCHEMA, ReplayFormatError


def comparable(path: Path, read) -> tuple:
    result = read(path)
    rows = [{k: ("nan" if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
            for row in result.table.to_pylist()]
    rejected = [(r.line_number, r.reason, r.text) for r in result.rejected]
    assert result.table.schema == REPLAY_SCHEMA
    return rows, rejected, result.lines_read


def assert_readers_agree(path: Path) -> None:
    assert comparable(path, load_replay) == comparable(path, read_replay_reference)


def test_fast_path_reads_an_ordinary_file(tmp_path, make_records, jsonl_writer):
    path = jsonl_writer(tmp_path / "r.jsonl", make_records(seed=3, count=200))
    assert read_fast(path) is not None
    assert_readers_agree(path)


SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-10**20, 10**20),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)
STRINGS = st.text(max_size=8)
METADATA = st.fixed_dictionaries(
    {},
    optional={
        "evidence_entities": st.lists(STRINGS, max_size=3) | VALUES,
        "claimed_entities": st.lists(STRINGS, max_size=3) | VALUES,
        "latency_ms": st.floats(0, 5000) | VALUES,
        "dataset": st.sampled_from(["docvqa", "chartqa"]) | VALUES,
        "raw_response": STRINGS | VALUES,
        "other": VALUES,
    },
)
RECORDS = st.fixed_dictionaries(
    {},
    optional={
        "id": STRINGS | VALUES,
        "prompt": STRINGS | VALUES,
        "response": STRINGS | VALUES,
        "reference": STRINGS | st.lists(STRINGS, max_size=3) | VALUES,
        "metadata": METADATA | VALUES,
    },
)
MUTATIONS = [
    lambda line: line,
    lambda line: line.replace("}", ",}", 1),  # trailing comma
    lambda line: line.replace("NaN", "nan").replace("Infinity", "inf"),  # DuckDB-only literals
    lambda line: line.replace('"response"', '"respons\\u0065"'),  # escaped key
    lambda line: line.replace('"response"', '"response": 1, "response"', 1),  # duplicate key
    lambda line: line + " x",  # trailing garbage
    lambda line: line[: len(line) // 2],  # truncated
    lambda line: "   ",  # blank
    lambda line: line + "\r",  # CRLF
    lambda line: "[" + line + "]",  # not an object
]


@settings(max_examples=70, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(RECORDS, st.booleans(), st.sampled_from(range(len(MUTATIONS)))), min_size=1, max_size=8))
def test_readers_agree_on_generated_lines(tmp_path, lines):
    path = tmp_path / "generated.jsonl"
    text = [MUTATIONS[mutation](json.dumps(record, ensure_ascii=ascii_only)) for record, ascii_only, mutation in lines]
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    assert_readers_agree(path)


@pytest.mark.parametrize(
    "raw",
    [
        b'\xef\xbb\xbf{"response": "bom"}',
        b'{"response": "\\ud800"}',
        b'{"response": "bad \xff byte"}',
        b'{"response": "x", "metadata": {"latency_ms": 1e400}}',
        b'{"response": "x", "metadata": {"latency_ms": ' + b"9" * 400 + b"}}",
        b'{"response": "x", "metadata": {"latency_ms": "12"}}',
        b'{"response": "x", "metadata": {"evidence_entities": "abc"}}',
        b'{"response": "x", "reference": {"a": 1}}',
        b'{"response": "x", "reference": 12.50}',
        b'{"response": "x", "metadata": null}',
        b'{"response": null}',
        b'{"prompt": null, "response": "x"}',
        b'{"response": "x"}\x00',
    ],
)
def test_readers_agree_on_awkward_lines(tmp_path, raw):
    path = tmp_path / "awkward.jsonl"
    path.write_bytes(b'{"id": "ok", "response": "fine"}\n\n' + raw + b"\n")
    assert_readers_agree(path)


def test_strict_readers_raise_for_the_first_bad_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"response": "a"}\n\n{"response": "b",}\n[1]\n')
    for read in (read_replay, lambda p: list(iter_replay_records(p))):
        with pytest.raises(ReplayFormatError) as raised:
            read(path)
        assert (raised.value.path, raised.value.line_number) == (str(path), 3)
        assert raised.value.reason.startswith("not valid JSON")
        assert str(raised.value).startswith(f"{path}:3: not valid JSON")


def test_skip_invalid_hands_rejects_to_the_callback(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"response": "a"}\n"text"\n{"response": "b"}\n')
    seen = []
    table = read_replay(path, skip_invalid=True, on_reject=seen.append)
    assert table.column("response").to_pylist() == ["a", "b"]
    assert [(r.line_number, r.reason, r.text) for r in seen] == [(2, "not a JSON object (found string)", '"text"')]
    seen_by_record = []
    records = list(iter_replay_records(path, skip_invalid=True, on_reject=seen_by_record.append))
    assert [r["response"] for r in records] == ["a", "b"]
    assert seen_by_record == seen


def test_a_record_of_a_several_image_prompt_scores_as_one_without_its_image_fields(tmp_path):
    """Replay records hold text (prompt, response, reference, metadata), no image: a record from a prompt that
    showed two images, with its images named in ``metadata``, reads exactly as the same record without them."""
    plain = {"id": "pair", "prompt": "Left , right : same colour?", "response": '{"answer": "no"}',
             "reference": ["no"], "metadata": {"latency_ms": 12.0, "dataset": "pairs"}}
    imaged = {**plain, "metadata": {**plain["metadata"], "image_count": 2, "images": ["red.png", "blue.png"],
                                    "vision_tokens": 48}}
    (tmp_path / "plain.jsonl").write_text(json.dumps(plain) + "\n")
    (tmp_path / "imaged.jsonl").write_text(json.dumps(imaged) + "\n")
    assert_readers_agree(tmp_path / "imaged.jsonl")
    assert comparable(tmp_path / "imaged.jsonl", load_replay) == comparable(tmp_path / "plain.jsonl", load_replay)
    assert read_replay(tmp_path / "imaged.jsonl").column("reference").to_pylist() == [["no"]]
