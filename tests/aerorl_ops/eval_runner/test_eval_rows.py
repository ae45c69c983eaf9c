"""The eval_* tables and the eval_vs_baseline view, on hand-made outcomes whose numbers are known."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import duckdb
import pandas as pd
import pytest

from aerorl_ops.eval_metrics.paired import mcnemar_exact
from aerorl_ops.eval_metrics.reflection import has_reflection
from aerorl_ops.eval_metrics.sampling import SamplingSetting
from aerorl_ops.eval_runner.eval_rows import EvalRunRecord, RoleEvaluation, eval_tables
from aerorl_ops.eval_runner.paired_differences import compare_outcomes
from aerorl_ops.eval_runner.runner import EvalOutcome, SampleRecord
from aerorl_ops.eval_runner.summaries import setting_metrics
from aerorl_ops.reporting.eval_report import format_side_by_side, side_by_side
from aerorl_ops.storage.duckdb_store import replace_partitions
from aerorl_ops.storage.eval_schema import EVAL_TABLES
from aerorl_ops.storage.eval_views import create_eval_views

GREEDY = SamplingSetting("greedy_pass1", greedy=True)
PASS2 = SamplingSetting("high_temp_pass2", n=2, k=2)
TYPES = ["shape", "shape", "colour", "colour"]


def outcome(greedy: list[bool], pass2: list[tuple[bool, bool]], texts: dict[int, str] | None = None) -> EvalOutcome:
    """Four questions; ``greedy[q]`` and the two ``pass2[q]`` responses right or wrong."""
    texts = texts or {}
    samples = [SampleRecord("greedy_pass1", q, f"item-{q}", TYPES[q], 0, texts.get(q, "red"), ok, float(ok), 1,
                            False, has_reflection(texts.get(q, ""))) for q, ok in enumerate(greedy)]
    samples += [SampleRecord("high_temp_pass2", q, f"item-{q}", TYPES[q], i, "blue", ok, float(ok), 4, True, False)
                for q, pair in enumerate(pass2) for i, ok in enumerate(pair)]
    metrics = [*setting_metrics(GREEDY, samples[:4], 4), *setting_metrics(PASS2, samples[4:], 4)]
    return EvalOutcome((0, 1, 2, 3), (GREEDY, PASS2), 4, 0, tuple(samples), tuple(metrics), {"greedy_pass1": 1.0})


MODEL = outcome([True, True, False, True], [(True, False), (False, False), (True, True), (False, True)],
                texts={0: "Wait, red", 2: "wait... blue"})
BASELINE = outcome([False, True, False, False], [(False, False), (False, False), (True, False), (False, False)])


def record(role: str, model: str, result: EvalOutcome, started: datetime) -> RoleEvaluation:
    return RoleEvaluation(EvalRunRecord.of(role, model, result, dataset="easy_vqa", split="test", device="cpu",
                                          started_at=started, finished_at=started), result)


def write(conn, eval_id: str, model: str, baseline: str, started: datetime) -> list[int]:
    evaluations = [record("model", model, MODEL, started), record("baseline", baseline, BASELINE, started)]
    return replace_partitions(conn, eval_tables(eval_id, evaluations, compare_outcomes(MODEL, BASELINE, 500)))


@pytest.fixture
def conn(tmp_path):
    with duckdb.connect(str(tmp_path / "report.duckdb")) as connection:
        create_eval_views(connection)
        yield connection


def view(conn, *where: str) -> dict:
    cursor = conn.execute("SELECT * FROM eval_vs_baseline WHERE " + " AND ".join(where or ["true"]))
    names = [column[0] for column in cursor.description]
    rows = [SimpleNamespace(**dict(zip(names, row, strict=True))) for row in cursor.fetchall()]
    return {(r.model, r.eval_id, r.setting, r.question_type): r for r in rows}


def test_every_table_gets_the_eval_rows(conn):
    counts = write(conn, "e1", "trained", "base", datetime(2026, 1, 1, tzinfo=UTC))
    # runs: 2 roles; samples: 2 x (4 greedy + 8 pass@2); metrics: 2 x 2 settings x 3 types; comparisons: 2 x 3
    assert counts == [2, 24, 12, 6]
    assert write(conn, "e1", "trained", "base", datetime(2026, 1, 1, tzinfo=UTC)) == counts  # rerun replaces
    assert [conn.execute(f"SELECT count(*) FROM {spec.name}").fetchone()[0] for spec in EVAL_TABLES] == counts
    reflected = conn.execute("SELECT item_index FROM eval_samples WHERE reflection ORDER BY item_index").fetchall()
    assert reflected == [(0,), (2,)]


def test_the_view_puts_model_and_baseline_side_by_side_with_the_paired_interval(conn):
    write(conn, "e1", "trained", "base", datetime(2026, 1, 1, tzinfo=UTC))
    rows = view(conn)
    greedy = rows["trained", "e1", "greedy_pass1", "all"]
    expected = mcnemar_exact([1, 1, 0, 1], [0, 1, 0, 0])
    assert (greedy.model_accuracy, greedy.baseline_accuracy, greedy.difference) == (0.75, 0.25, 0.5)
    assert (greedy.method, greedy.p_value, greedy.questions) == ("mcnemar_exact", 0.5, 4)
    assert (greedy.ci_low, greedy.ci_high) == pytest.approx((expected.ci_low, expected.ci_high))
    assert greedy.baseline == "base" and greedy.dataset == "easy_vqa"
    # reflection: model responses 0 and 2 reflect; of the three correct, one (0) reflects
    assert (greedy.model_reflection_ratio, greedy.baseline_reflection_ratio) == (0.5, 0.0)
    assert (greedy.model_mean_length, greedy.model_length_clip_ratio) == (1.0, 0.0)
    shape = rows["trained", "e1", "greedy_pass1", "shape"]
    assert (shape.model_accuracy, shape.baseline_accuracy, shape.difference) == (1.0, 0.5, 0.5)
    pass2 = rows["trained", "e1", "high_temp_pass2", "all"]
    # per question pass@2 of 2 samples = any correct: model [1, 0, 1, 1], baseline [0, 0, 1, 0]
    assert (pass2.model_accuracy, pass2.baseline_accuracy, pass2.difference) == (0.75, 0.25, 0.5)
    assert pass2.method == "paired_bootstrap" and pass2.ci_low <= 0.5 <= pass2.ci_high
    assert (pass2.model_pass_at_1, pass2.baseline_pass_at_1) == (0.5, 0.125)
    assert (pass2.model_length_clip_ratio, pass2.model_mean_length) == (1.0, 4.0)


def test_the_view_keeps_the_latest_eval_of_each_model_and_baseline(conn):
    write(conn, "old", "trained", "base", datetime(2026, 1, 1, tzinfo=UTC))
    write(conn, "new", "trained", "base", datetime(2026, 2, 1, tzinfo=UTC))
    write(conn, "other", "trained", "other-base", datetime(2026, 1, 15, tzinfo=UTC))
    evals = {(model, eval_id) for model, eval_id, _, _ in view(conn)}
    assert evals == {("trained", "new"), ("trained", "other")}
    assert {r.baseline for r in view(conn, "eval_id = 'other'").values()} == {"other-base"}


def test_the_side_by_side_table_shows_every_metric_and_the_interval_on_accuracy(conn):
    write(conn, "e1", "trained", "base", datetime(2026, 1, 1, tzinfo=UTC))
    table = side_by_side(conn, "e1")
    rows = {(r.setting, r.question_type, r.metric): r for r in table.itertuples()}
    accuracy = rows["greedy_pass1", "all", "pass@1"]
    assert (accuracy.model, accuracy.baseline, accuracy.difference, accuracy.method) == (0.75, 0.25, 0.5,
                                                                                         "mcnemar_exact")
    assert accuracy.ci == pytest.approx((mcnemar_exact([1, 1, 0, 1], [0, 1, 0, 0]).ci_low,
                                         mcnemar_exact([1, 1, 0, 1], [0, 1, 0, 0]).ci_high))
    no_reflection = rows["greedy_pass1", "all", "correct_ratio_in_reflection"]
    assert no_reflection.model == 0.5 and pd.isna(no_reflection.baseline) and pd.isna(no_reflection.difference)
    assert list(table["setting"].drop_duplicates()) == ["greedy_pass1", "high_temp_pass2"]
    assert rows["high_temp_pass2", "colour", "pass@2"].ci is not None
    shown = format_side_by_side(table)
    assert shown.loc[0, "95% CI"].startswith("[") and "NULL" in set(shown["baseline"])
    with pytest.raises(ValueError, match="no eval 'missing'"):
        side_by_side(conn, "missing")


def test_an_eval_needs_distinct_roles():
    with pytest.raises(ValueError, match="one evaluation per role"):
        eval_tables("e", [record("model", "a", MODEL, datetime.now(UTC))] * 2)


EVAL_DDL = {
    "eval_runs": "eval_id VARCHAR NOT NULL, role VARCHAR NOT NULL, model VARCHAR NOT NULL, model_source VARCHAR, "
                 "dataset VARCHAR, split VARCHAR, questions INTEGER, settings JSON, max_new_tokens INTEGER, "
                 "seed BIGINT, training_run_id VARCHAR, step INTEGER, device VARCHAR, started_at TIMESTAMP WITH "
                 "TIME ZONE, finished_at TIMESTAMP WITH TIME ZONE, wall_s DOUBLE, config JSON, rejected_rows INTEGER, "
                 "cpu_s DOUBLE",
    "eval_samples": "eval_id VARCHAR NOT NULL, role VARCHAR NOT NULL, setting VARCHAR NOT NULL, item_index INTEGER NOT "
                    "NULL, item_id VARCHAR, question_type VARCHAR, sample_no INTEGER NOT NULL, response VARCHAR, "
                    "correct BOOLEAN, reward DOUBLE, response_tokens INTEGER, truncated BOOLEAN, reflection BOOLEAN, "
                    "source VARCHAR, turns INTEGER, distribution VARCHAR",
    "eval_metrics": "eval_id VARCHAR NOT NULL, role VARCHAR NOT NULL, setting VARCHAR NOT NULL, question_type VARCHAR "
                    "NOT NULL, k INTEGER, samples_per_question INTEGER, questions INTEGER, responses INTEGER, accuracy "
                    "DOUBLE, accuracy_stderr DOUBLE, pass_at_1 DOUBLE, reward_mean DOUBLE, mean_length DOUBLE, "
                    "length_clip_ratio DOUBLE, n_correct INTEGER, n_reflection INTEGER, reflection_ratio DOUBLE, "
                    "reflection_ratio_in_correct DOUBLE, reflection_ratio_in_incorrect DOUBLE, "
                    "correct_ratio_in_reflection DOUBLE, correct_ratio_in_no_reflection DOUBLE, "
                    "source VARCHAR NOT NULL, mean_turns DOUBLE, distribution VARCHAR",
    "eval_comparisons": "eval_id VARCHAR NOT NULL, setting VARCHAR NOT NULL, question_type VARCHAR NOT NULL, method "
                        "VARCHAR NOT NULL, questions INTEGER, model_accuracy DOUBLE, baseline_accuracy DOUBLE, "
                        "difference DOUBLE, ci_low DOUBLE, ci_high DOUBLE, confidence DOUBLE, b INTEGER, c INTEGER, "
                        "p_value DOUBLE, resamples INTEGER, source VARCHAR NOT NULL, distribution VARCHAR",
}


def test_the_eval_tables_are_the_documented_ones(conn):
    """A change here changes every report database (and the table in docs/evaluation.md): it needs a migration."""
    for spec in EVAL_TABLES:
        described = ", ".join(f"{name} {kind}" + ("" if null == "YES" else " NOT NULL")
                              for name, kind, null, *_ in conn.execute(f"DESCRIBE {spec.name}").fetchall())
        assert described == EVAL_DDL[spec.name]


def test_a_held_out_distributions_eval_labels_its_sample_metric_and_comparison_rows(conn):
    """An eval of a held-out distribution (``distribution`` given) carries its name in every per-sample,
    per-metric and comparison row; an eval of the dataset itself holds NULL there."""
    started = datetime.now(UTC)
    evaluations = [record("model", "m", MODEL, started), record("baseline", "b", BASELINE, started)]
    comparisons = compare_outcomes(MODEL, BASELINE, 50)
    replace_partitions(conn, [*eval_tables("e/big", evaluations, comparisons, "big"),
                              *eval_tables("e", evaluations, comparisons)])
    for table in ("eval_samples", "eval_metrics", "eval_comparisons"):
        by_eval = dict(conn.execute(f"SELECT eval_id, list(DISTINCT distribution) FROM {table} GROUP BY 1").fetchall())
        assert by_eval == {"e/big": ["big"], "e": [None]}, table
    assert conn.execute("SELECT count(*) FROM eval_metrics WHERE eval_id = 'e/big'").fetchone() == \
        conn.execute("SELECT count(*) FROM eval_metrics WHERE eval_id = 'e'").fetchone()
