"""The check functions behind the benchmark asset checks, on tiny hand-built tables."""

from __future__ import annotations

import doctest
from datetime import UTC, datetime, timedelta

import duckdb
import pyarrow as pa
import pytest

from aerorl_ops.reporting import checks
from aerorl_ops.reporting.checks import (
    Finding,
    Regression,
    latency_findings,
    nan_score_findings,
    previous_runs,
    prompt_echo_findings,
    regressions,
    response_drift,
    responses_by_sample,
    sample_id_mismatch,
)
from aerorl_ops.storage.duckdb_store import ensure_tables
from aerorl_ops.storage.views import create_views

PROMPT = 'What is the total?\nAnswer with strict JSON of the form {"answer": "<answer>"} and nothing else.'
NAN = float("nan")


def test_docstring_examples():
    assert doctest.testmod(checks).failed == 0


def test_prompt_echoes_are_found_and_real_answers_are_not():
    table = pa.table({
        "sample_id": ["ok", "empty", "equal", "starts", "templated", "marker"],
        "prompt": [PROMPT] * 6,
        "response": ['{"answer": "12"}', "", f"  {PROMPT} ", f"{PROMPT}\n12",
                     f"system\nYou are a helpful assistant.\nuser\n{PROMPT}\nassistant\n", "<|im_start|>assistant"],
    })
    found = prompt_echo_findings(table)
    assert [(f.sample_id, f.problem) for f in found] == [
        ("equal", "equals the prompt"),
        ("starts", "starts with the prompt"),
        ("templated", "contains the prompt"),
        ("marker", "contains the chat template's <|im_start|>"),
    ]
    assert found[3].value == "<|im_start|>assistant"
    assert len(found[2].value) == 80 and found[2].value.endswith("…")  # long responses are shortened


def test_an_empty_prompt_is_never_an_echo():
    table = pa.table({"sample_id": ["a"], "prompt": [""], "response": ["anything"]})
    assert prompt_echo_findings(table) == []


def test_latencies_must_be_finite_and_non_negative():
    table = pa.table({"sample_id": ["ok", "nan", "negative", "missing", "inf"],
                      "latency_ms": [0.0, NAN, -1.0, None, 5.0],
                      "batch_latency_ms": [10.0, 10.0, 10.0, 10.0, float("inf")]})
    assert latency_findings(table) == [
        Finding("nan", "latency_ms is nan", "nan"),
        Finding("negative", "latency_ms is -1.0", "-1.0"),
        Finding("missing", "latency_ms is None", "None"),
        Finding("inf", "batch_latency_ms is inf", "inf"),
    ]


def scores(**overrides) -> pa.Table:
    columns = {"sample_id": ["doc", "chart"], "verifier": [1.0, -0.5], "grounding": [1.0, 0.0],
               "format": [1.0, 1.0], "cost": [1.0, 1.0], "total_reward": [1.0, 0.1],
               "anls": [1.0, None], "relaxed_accuracy": [None, 0.0]}
    return pa.table({**columns, **overrides})


def test_null_metrics_are_fine_but_nan_and_a_missing_total_are_not():
    assert nan_score_findings(scores()) == []
    bad = scores(anls=[NAN, None], grounding=[0.0, NAN], total_reward=[None, 0.1])
    assert nan_score_findings(bad) == [
        Finding("chart", "grounding is NaN", "nan"),
        Finding("doc", "total_reward is missing", "null"),
        Finding("doc", "anls is NaN", "nan"),
    ]


def test_sample_ids_must_match_one_to_one():
    assert sample_id_mismatch(["a", "b"], ["b", "a"]).ok
    mismatch = sample_id_mismatch(["a", "b", "c"], ["a", "a", "d"])
    assert not mismatch.ok
    assert mismatch._asdict() == {"missing": ["b", "c"], "unexpected": ["d"], "duplicated": ["a"]}


@pytest.mark.parametrize("current, expected", [
    ({"pass_rate": 0.45, "samples_per_s": 9.0}, []),                                     # exactly -10 %: allowed
    ({"pass_rate": 0.449, "samples_per_s": 9.0}, [Regression("pass_rate", 0.5, 0.449)]),
    ({"pass_rate": 0.6, "samples_per_s": 5.0}, [Regression("samples_per_s", 10.0, 5.0)]),
    ({"pass_rate": None, "samples_per_s": 10.0}, []),                                    # nothing to compare
])
def test_regressions_beyond_the_relative_margin(current, expected):
    assert regressions(current, {"pass_rate": 0.5, "samples_per_s": 10.0}, 0.1) == expected


def test_a_zero_or_missing_baseline_never_regresses_and_the_margin_is_checked():
    assert regressions({"pass_rate": 0.0, "samples_per_s": 1.0}, {"pass_rate": 0.0, "samples_per_s": None}, 0.1) == []
    assert Regression("samples_per_s", 10.0, 5.0).relative_change == -0.5
    with pytest.raises(ValueError, match="max_relative_drop"):
        regressions({}, {}, 1.5)


@pytest.fixture
def conn():
    """Runs r1 < r2 < r3 of model m at batch 1 (r2 also at batch 8), with responses for drift."""
    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    with duckdb.connect(":memory:") as connection:
        ensure_tables(connection)
        connection.executemany(
            "INSERT INTO benchmark_summary (run_id, model_key, batch_size, dataset, created_at, samples_per_s, "
            "pass_rate) VALUES (?, 'm', ?, 'docvqa', ?, ?, ?)",
            [("r1", 1, t0, 10.0, 0.5), ("r2", 1, t0 + timedelta(days=1), 8.0, 0.5),
             ("r2", 8, t0 + timedelta(days=1), 40.0, 0.5), ("r3", 1, t0 + timedelta(days=2), 9.0, 0.25)])
        connection.executemany(
            "INSERT INTO generations (run_id, model_key, batch_size, sample_id, response) VALUES ('r2', 'm', ?, ?, ?)",
            [(1, "a", "12"), (1, "b", "May 4"), (8, "a", "12"), (8, "b", "May 5"), (8, "c", "40")])
        create_views(connection)
        yield connection


def test_previous_run_reads_the_same_model_batch_size_and_dataset(conn):
    metrics = ("pass_rate", "samples_per_s")
    (found,) = previous_runs(conn, "r2", "m", 1, metrics)
    assert (found.previous_run_id, found.dataset) == ("r1", "docvqa")
    assert found.current == {"pass_rate": 0.5, "samples_per_s": 8.0}
    assert found.previous == {"pass_rate": 0.5, "samples_per_s": 10.0}
    assert previous_runs(conn, "r3", "m", 1, metrics)[0].previous == {"pass_rate": 0.5, "samples_per_s": 8.0}
    (first_at_8,) = previous_runs(conn, "r2", "m", 8, metrics)
    assert first_at_8.previous_run_id is None and first_at_8.previous == {"pass_rate": None, "samples_per_s": None}
    assert previous_runs(conn, "r9", "m", 1) == []
    conn.execute("INSERT INTO benchmark_summary (run_id, model_key, batch_size, dataset, created_at, accuracy) "
                 "VALUES ('r3', 'm', 1, 'easy_vqa', ?, 0.75)", [datetime(2026, 3, 3, tzinfo=UTC)])
    by_dataset = {run.dataset: run for run in previous_runs(conn, "r3", "m", 1)}
    assert by_dataset["easy_vqa"].previous_run_id is None  # each dataset has its own history
    assert by_dataset["easy_vqa"].current["accuracy"] == 0.75 and by_dataset["docvqa"].previous_run_id == "r2"
    with pytest.raises(ValueError, match="tracks"):
        previous_runs(conn, "r2", "m", 1, metrics=("peak_memory_mb",))


def test_batch_size_drift_compares_responses_per_sample(conn):
    drift = response_drift(responses_by_sample(conn, "r2", "m", 1), responses_by_sample(conn, "r2", "m", 8))
    assert drift.compared == 2
    assert drift.mismatches == [("b", "May 4", "May 5")]
    assert (drift.only_in_reference, drift.only_in_candidate) == ([], ["c"])
    assert drift.mismatch_rate == 0.5
    assert responses_by_sample(conn, "r1", "m", 1) == {}
    assert response_drift({}, {"a": "1"}).mismatch_rate == 0.0
