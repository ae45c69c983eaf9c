"""The report views over a hand-built database: two runs of one model at batch sizes 1 and 8."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duckdb
import pandas as pd
import pytest

from aerorl_ops.reporting.partition_summary import verifier_metric_agreement
from aerorl_ops.storage.duckdb_store import ensure_tables
from aerorl_ops.storage.views import VIEWS, create_views

T0 = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)
T1 = T0 + timedelta(days=1)
MODEL = "tiny"

# (run_id, batch_size, created_at, samples_per_s, pass_rate, latency_p95_ms, average_reward)
SUMMARIES = [
    ("night-1", 1, T0, 2.0, 0.50, 100.0, 0.25),
    ("night-1", 8, T0 + timedelta(minutes=5), 8.0, 0.50, 400.0, 0.25),
    ("night-2", 1, T1, 2.5, 0.75, 90.0, 0.5),
    # night-2's batch 8 partition never landed: night-1 stays its latest
]
RUNS = [("night-1", T0 - timedelta(minutes=1), T0 + timedelta(minutes=5)),
        ("night-2", T1 - timedelta(minutes=1), T1)]

# (run_id, batch_size, sample_id, dataset, response, reference,
#  verifier, total_reward, passed, manual_pass, anls, relaxed_accuracy)
SAMPLES = [
    # agree: verifier and ANLS both say correct
    ("night-1", 1, "doc-1", "docvqa", '{"answer": "May 4"}', ["May 4"], 1.0, 0.9, True, True, 1.0, None),
    # manual false pass: "12" is contained in the response, the stack fails it; ANLS says wrong, verifier agrees
    ("night-1", 1, "doc-2", "docvqa", '{"answer": "125"} 12', ["12"], -0.5, 0.1, False, True, 0.0, None),
    # disagreement: the verifier calls "contained" correct (0.5), relaxed accuracy says wrong
    ("night-1", 8, "chart-1", "chartqa", '{"answer": "about 40"}', ["40", "40.0"], 0.5, 0.4, True, True,
     None, 0.0),
    # disagreement the other way, and a manual false pass: relaxed accuracy correct, verifier missing
    ("night-2", 1, "chart-2", "chartqa", "41", ["40"], None, 0.0, False, True, None, 1.0),
    # no standard metric (no references): never a disagreement
    ("night-2", 1, "doc-3", "docvqa", "", [], -0.5, -0.2, False, False, None, None),
]


@pytest.fixture
def conn():
    with duckdb.connect(":memory:") as connection:
        ensure_tables(connection)
        connection.executemany(
            "INSERT INTO runs (run_id, kind, started_at, finished_at) VALUES (?, 'benchmark', ?, ?)", RUNS)
        connection.executemany(
            "INSERT INTO benchmark_summary (run_id, model_key, batch_size, dataset, created_at, samples_per_s, "
            "pass_rate, latency_p95_ms, average_reward) VALUES (?, 'tiny', ?, 'docvqa', ?, ?, ?, ?, ?)", SUMMARIES)
        for (run_id, batch, sample_id, dataset, response, reference, verifier, total, passed, manual,
             anls, relaxed) in SAMPLES:
            connection.execute(
                "INSERT INTO generations (run_id, model_key, batch_size, sample_id, dataset, prompt, response, "
                "reference, latency_ms) VALUES (?, 'tiny', ?, ?, ?, 'Q?', ?, ?, 10.0)",
                [run_id, batch, sample_id, dataset, response, reference])
            connection.execute(
                "INSERT INTO reward_scores (run_id, model_key, batch_size, sample_id, dataset, verifier, "
                "total_reward, passed, manual_pass, anls, relaxed_accuracy) "
                "VALUES (?, 'tiny', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [run_id, batch, sample_id, dataset, verifier, total, passed, manual, anls, relaxed])
        assert create_views(connection) == tuple(VIEWS)
        yield connection


def test_create_views_is_idempotent(conn):
    create_views(conn)
    names = conn.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY view_name").fetchall()
    assert [name for (name,) in names] == sorted(VIEWS)


def test_latest_summary_takes_each_partitions_latest_run(conn):
    rows = conn.execute("SELECT model_key, batch_size, run_id, samples_per_s, pass_rate, run_finished_at "
                        "FROM latest_benchmark_summary ORDER BY batch_size").fetchall()
    assert rows == [(MODEL, 1, "night-2", 2.5, 0.75, T1), (MODEL, 8, "night-1", 8.0, 0.5, RUNS[0][2])]


def test_latest_summary_follows_a_rerun_of_an_old_run_id(conn):
    conn.execute("UPDATE benchmark_summary SET created_at = ? WHERE run_id = 'night-1' AND batch_size = 1",
                 [T1 + timedelta(hours=1)])
    rows = conn.execute("SELECT batch_size, run_id FROM latest_benchmark_summary ORDER BY batch_size").fetchall()
    assert rows == [(1, "night-1"), (8, "night-1")]


def test_trends_carry_the_previous_runs_values_and_deltas(conn):
    rows = conn.execute(
        "SELECT batch_size, run_id, run_number, previous_run_id, "
        "samples_per_s, previous_samples_per_s, samples_per_s_delta, pass_rate, previous_pass_rate, pass_rate_delta, "
        "latency_p95_ms, previous_latency_p95_ms, latency_p95_ms_delta, "
        "average_reward, previous_average_reward, average_reward_delta "
        "FROM benchmark_trends ORDER BY batch_size, run_number").fetchall()
    assert rows == [
        (1, "night-1", 1, None, 2.0, None, None, 0.5, None, None, 100.0, None, None, 0.25, None, None),
        (1, "night-2", 2, "night-1", 2.5, 2.0, 0.5, 0.75, 0.5, 0.25, 90.0, 100.0, -10.0, 0.5, 0.25, 0.25),
        (8, "night-1", 1, None, 8.0, None, None, 0.5, None, None, 400.0, None, None, 0.25, None, None),
    ]


def test_manual_false_passes_join_the_response_and_reference(conn):
    rows = conn.execute("SELECT run_id, batch_size, sample_id, response, reference, total_reward "
                        "FROM manual_false_passes ORDER BY run_id, sample_id").fetchall()
    assert rows == [("night-1", 1, "doc-2", '{"answer": "125"} 12', ["12"], 0.1),
                    ("night-2", 1, "chart-2", "41", ["40"], 0.0)]


def test_verifier_metric_disagreements_both_ways(conn):
    rows = conn.execute("SELECT run_id, sample_id, metric, metric_value, verifier_correct, metric_correct, "
                        "response, reference FROM verifier_metric_disagreements ORDER BY run_id").fetchall()
    assert rows == [
        ("night-1", "chart-1", "relaxed_accuracy", 0.0, True, False, '{"answer": "about 40"}', ["40", "40.0"]),
        ("night-2", "chart-2", "relaxed_accuracy", 1.0, False, True, "41", ["40"]),
    ]


def test_disagreements_match_the_summary_agreement_rule(conn):
    """The view and ``verifier_metric_agreement`` grade the same rows the same way."""
    columns = ["run_id", "batch_size", "verifier", "anls", "relaxed_accuracy"]
    scores = pd.DataFrame(conn.execute(f"SELECT {', '.join(columns)} FROM reward_scores").fetchall(), columns=columns)
    disagreements = dict(conn.execute("SELECT run_id || '/' || batch_size, count(*) "
                                      "FROM verifier_metric_disagreements GROUP BY ALL").fetchall())
    for (run_id, batch), group in scores.groupby(["run_id", "batch_size"]):
        graded = group[["anls", "relaxed_accuracy"]].notna().any(axis=1).sum()
        expected = verifier_metric_agreement(group.reset_index(drop=True))
        assert 1 - disagreements.get(f"{run_id}/{batch}", 0) / graded == pytest.approx(expected)


def test_latest_summary_and_trends_are_per_dataset(conn):
    """A second dataset in the same partitions: its own latest row and its own history."""
    conn.executemany(
        "INSERT INTO benchmark_summary (run_id, model_key, batch_size, dataset, created_at, accuracy) "
        "VALUES (?, 'tiny', 1, 'easy_vqa', ?, ?)", [("night-1", T1 - timedelta(days=1), 0.5), ("night-2", T1, 0.625)])
    latest = conn.execute("SELECT dataset, run_id, accuracy FROM latest_benchmark_summary WHERE batch_size = 1 "
                          "ORDER BY dataset").fetchall()
    assert latest == [("docvqa", "night-2", None), ("easy_vqa", "night-2", 0.625)]
    trends = conn.execute("SELECT run_id, previous_run_id, accuracy, previous_accuracy, accuracy_delta "
                          "FROM benchmark_trends WHERE dataset = 'easy_vqa' ORDER BY run_number").fetchall()
    assert trends == [("night-1", None, 0.5, None, None), ("night-2", "night-1", 0.625, 0.5, 0.125)]
