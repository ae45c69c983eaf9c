"""An eval of a mixture reports accuracy per source dataset (issue 34, item 5): ``SampleRecord.source``, the
``eval_metrics`` / ``eval_comparisons`` rows per source, the side-by-side table, the DuckDB rows through the real
writer (an old database too). Hand-made outcomes whose numbers are known: 3 questions of part ``a`` and 2 of
part ``b``; part ``c`` has no question in the sample. Then ``evaluate_model`` on a real two-part mixture with the
yes-sayer (tests/conftest.py), so each source's accuracy is its share of "yes" answers."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import duckdb
import pytest
import torch
from PIL import Image

from aerorl_ops.envs.mixture import mixture_env
from aerorl_ops.envs.registry import make_env
from aerorl_ops.eval_metrics.paired import mcnemar_exact, paired_bootstrap
from aerorl_ops.eval_metrics.sampling import SamplingSetting
from aerorl_ops.eval_runner.eval_rows import EvalRunRecord, RoleEvaluation, eval_tables
from aerorl_ops.eval_runner.paired_differences import compare_outcomes
from aerorl_ops.eval_runner.runner import EvalOutcome, evaluate_model
from aerorl_ops.eval_runner.summaries import setting_metrics
from aerorl_ops.reporting.eval_report import format_side_by_side, side_by_side
from aerorl_ops.storage.duckdb_store import PartitionWrite, ensure_tables, replace_partitions
from aerorl_ops.storage.eval_schema import EVAL_METRICS, EVAL_TABLES, SampleRecord
from aerorl_ops.storage.eval_views import create_eval_views
from aerorl_ops.storage.schema import TableSpec

GREEDY = SamplingSetting("greedy_pass1", greedy=True)
PASS2 = SamplingSetting("high_temp_pass2", n=2, k=2)
SOURCES = ("a", "b", "c")  # the mixture's parts, in order; "c" drew no question
PART = ["a", "b", "a", "b", "a"]  # question q's part: a = {0, 2, 4}, b = {1, 3}
TYPES = ["shape", "colour", "colour", "shape", "shape"]


def outcome(greedy: list[bool], pass2: list[tuple[bool, bool]], mixture: bool = True) -> EvalOutcome:
    """Five questions; ``greedy[q]`` and the two ``pass2[q]`` responses right or wrong."""
    def sample(setting: str, q: int, no: int, ok: bool) -> SampleRecord:
        return SampleRecord(setting, q, f"{PART[q]}/q{q}", TYPES[q], no, "red", ok, float(ok), 1, False, False,
                            source=PART[q] if mixture else None)

    greedy_samples = [sample(GREEDY.name, q, 0, ok) for q, ok in enumerate(greedy)]
    pass2_samples = [sample(PASS2.name, q, no, ok) for q, pair in enumerate(pass2) for no, ok in enumerate(pair)]
    sources = SOURCES if mixture else ()
    metrics = [*setting_metrics(GREEDY, greedy_samples, 4, sources=sources),
               *setting_metrics(PASS2, pass2_samples, 4, sources=sources)]
    return EvalOutcome(tuple(range(5)), (GREEDY, PASS2), 4, 0, (*greedy_samples, *pass2_samples), tuple(metrics))


# greedy: a = q0 q2 q4 right, right, wrong (2/3); b = q1 q3 wrong, wrong (0)
MODEL = outcome([True, False, True, False, False],
                [(True, False), (False, False), (False, False), (False, True), (True, True)])
# greedy: a = wrong, right, wrong (1/3); b = right, wrong (1/2)
BASELINE = outcome([False, True, True, False, False],
                   [(False, False), (True, False), (False, False), (False, False), (True, False)])


def rows_of(outcome_: EvalOutcome, setting: str) -> list[tuple]:
    return [(m.question_type, m.source, m.questions, m.responses, m.accuracy) for m in outcome_.metrics
            if m.setting == setting]


def test_metrics_follow_per_source_after_the_types_in_the_mixture_s_order_a_part_with_no_question_left_out():
    assert rows_of(MODEL, GREEDY.name) == [
        ("all", "all", 5, 5, 2 / 5), ("colour", "all", 2, 2, 1 / 2), ("shape", "all", 3, 3, 1 / 3),
        ("all", "a", 3, 3, 2 / 3), ("all", "b", 2, 2, 0.0)]
    # pass@2 of two responses = any right: a = q0 q2 q4 -> 1, 0, 1; b = q1 q3 -> 0, 1
    assert rows_of(MODEL, PASS2.name)[-2:] == [("all", "a", 3, 6, 2 / 3), ("all", "b", 2, 4, 1 / 2)]
    by_a = MODEL.metric(PASS2.name, source="a")
    assert (by_a.pass_at_1, by_a.n_correct) == (3 / 6, 3)
    assert MODEL.sources() == ["a", "b"]
    indices, scores = MODEL.question_scores(GREEDY.name, source="b")
    assert (indices, scores.tolist()) == ([1, 3], [0.0, 0.0])


def test_one_dataset_has_exactly_the_rows_it_had_before_each_over_all_sources():
    plain = outcome([True, False, True, False, False], [(True, False)] * 5, mixture=False)
    assert rows_of(plain, GREEDY.name) == [("all", "all", 5, 5, 2 / 5), ("colour", "all", 2, 2, 1 / 2),
                                           ("shape", "all", 3, 3, 1 / 3)]
    assert plain.sources() == [] and {s.source for s in plain.samples} == {None}
    assert [(c.question_type, c.source) for c in compare_outcomes(plain, plain, 50)] == [
        ("all", "all"), ("colour", "all"), ("shape", "all")] * 2


def test_a_sample_of_a_source_the_mixture_does_not_have_is_named():
    stray = SampleRecord(GREEDY.name, 0, "z/q0", None, 0, "red", True, 1.0, 1, False, False, source="z")
    with pytest.raises(ValueError, match=r"item 'z/q0': its source 'z' is none of the mixture's parts \['a', 'b'\]"):
        setting_metrics(GREEDY, [stray], 4, sources=("a", "b"))
    with pytest.raises(ValueError, match=r"a mixture's part is named 'all'.*rename that \[datasets.all\] table"):
        setting_metrics(GREEDY, [replace(stray, source="all")], 4, sources=("a", "all"))


def test_each_source_is_compared_paired_by_the_setting_s_rule():
    rows = {(c.setting, c.question_type, c.source): c for c in compare_outcomes(MODEL, BASELINE, 200, seed=3)}
    assert list(rows)[-2:] == [(PASS2.name, "all", "a"), (PASS2.name, "all", "b")]
    a = rows[GREEDY.name, "all", "a"]  # model [1, 1, 0] vs baseline [0, 1, 0]
    expected = mcnemar_exact([1, 1, 0], [0, 1, 0])
    assert (a.method, a.questions, a.model_accuracy, a.baseline_accuracy, a.b, a.c) == (
        "mcnemar_exact", 3, 2 / 3, 1 / 3, 1, 0)
    assert (a.difference, a.ci_low, a.ci_high, a.p_value) == pytest.approx(
        (1 / 3, expected.ci_low, expected.ci_high, 1.0))
    b = rows[GREEDY.name, "all", "b"]  # model [0, 0] vs baseline [1, 0]
    assert (b.questions, b.model_accuracy, b.baseline_accuracy, b.difference, b.b, b.c) == (2, 0.0, 0.5, -0.5, 0, 1)
    pass2 = rows[PASS2.name, "all", "b"]  # pass@2 per question: model [0, 1] vs baseline [1, 0]
    expected = paired_bootstrap([0.0, 1.0], [1.0, 0.0], 200, 0.95, 3)
    assert (pass2.method, pass2.resamples, pass2.difference) == ("paired_bootstrap", 200, 0.0)
    assert (pass2.ci_low, pass2.ci_high) == pytest.approx((expected.ci_low, expected.ci_high))


def test_outcomes_over_different_sources_are_not_compared():
    with pytest.raises(ValueError, match=r"sources \['a', 'b'\] but the baseline on \[\]"):
        compare_outcomes(MODEL, outcome([True] * 5, [(True, True)] * 5, mixture=False))


def test_the_logger_tags_name_each_source():
    scalars = MODEL.scalars()
    assert scalars["eval/greedy_pass1/source/a/accuracy"] == pytest.approx(2 / 3)
    assert scalars["eval/greedy_pass1/source/b/accuracy"] == 0.0
    assert scalars["eval/greedy_pass1/accuracy"] == pytest.approx(2 / 5)
    assert not any(name.startswith("eval/greedy_pass1/source/a/") and not name.endswith("/accuracy")
                   for name in scalars)


def write(conn, eval_id: str, model: EvalOutcome, baseline: EvalOutcome) -> list[int]:
    started = datetime(2026, 1, 1, tzinfo=UTC)
    evaluations = [RoleEvaluation(EvalRunRecord.of(role, role, result, dataset="mix", split="test",
                                                   started_at=started), result)
                   for role, result in (("model", model), ("baseline", baseline))]
    return replace_partitions(conn, eval_tables(eval_id, evaluations, compare_outcomes(model, baseline, 200)))


def test_the_source_rows_land_in_the_eval_tables_and_the_view(tmp_path):
    with duckdb.connect(str(tmp_path / "report.duckdb")) as conn:
        create_eval_views(conn)
        # samples: 2 roles x (5 + 10); metrics: 2 roles x 2 settings x (all, 2 types, 2 sources); comparisons: 2 x 5
        assert write(conn, "mix-eval", MODEL, BASELINE) == [2, 30, 20, 10]
        sources = conn.execute("SELECT item_index, source FROM eval_samples WHERE role = 'model' AND setting = "
                               "'greedy_pass1' ORDER BY item_index").fetchall()
        assert sources == [(0, "a"), (1, "b"), (2, "a"), (3, "b"), (4, "a")]
        metrics = conn.execute("SELECT role, source, questions, accuracy FROM eval_metrics WHERE setting = "
                               "'greedy_pass1' AND question_type = 'all' ORDER BY role DESC, rowid").fetchall()
        assert metrics == [("model", "all", 5, pytest.approx(0.4)), ("model", "a", 3, pytest.approx(2 / 3)),
                           ("model", "b", 2, 0.0), ("baseline", "all", 5, pytest.approx(0.4)),
                           ("baseline", "a", 3, pytest.approx(1 / 3)), ("baseline", "b", 2, 0.5)]
        compared = conn.execute("SELECT source, questions, difference, b, c FROM eval_comparisons WHERE setting = "
                                "'greedy_pass1' AND question_type = 'all' ORDER BY rowid").fetchall()
        assert compared == [("all", 5, 0.0, 1, 1), ("a", 3, pytest.approx(1 / 3), 1, 0), ("b", 2, -0.5, 0, 1)]
        view = conn.execute("SELECT source, model_accuracy, baseline_accuracy, model_pass_at_1, baseline_pass_at_1 "
                            "FROM eval_vs_baseline WHERE setting = 'high_temp_pass2' AND question_type = 'all' "
                            "ORDER BY source").fetchall()
        # pass@2 per question: model a 1 0 1, b 0 1; baseline a 0 0 1, b 1 0; pass@1: right responses / responses
        assert view == [("a", pytest.approx(2 / 3), pytest.approx(1 / 3), 0.5, pytest.approx(1 / 6)),
                        ("all", 0.6, 0.4, 0.4, 0.2), ("b", 0.5, 0.5, 0.25, 0.25)]


def test_the_side_by_side_table_shows_each_source_s_accuracy_with_its_interval(tmp_path):
    with duckdb.connect(str(tmp_path / "report.duckdb")) as conn:
        create_eval_views(conn)
        write(conn, "mix-eval", MODEL, BASELINE)
        write(conn, "one-dataset", *(outcome([True] * 5, [(True, False)] * 5, mixture=False),) * 2)
        table = side_by_side(conn, "mix-eval")
        plain = side_by_side(conn, "one-dataset")
    greedy = table[table["setting"] == GREEDY.name]
    assert [tuple(row) for row in greedy[["question_type", "source", "metric"]].tail(4).itertuples(index=False)] == [
        ("colour", "all", "pass@1"), ("shape", "all", "pass@1"), ("all", "a", "pass@1"), ("all", "b", "pass@1")]
    b = greedy.iloc[-1]
    assert (b["model"], b["baseline"], b["difference"], b["method"]) == (0.0, 0.5, -0.5, "mcnemar_exact")
    expected = mcnemar_exact([0, 0], [1, 0])
    assert b["ci"] == pytest.approx((expected.ci_low, expected.ci_high))
    assert list(table["setting"].drop_duplicates()) == [GREEDY.name, PASS2.name]
    assert len(table) == 2 * (10 + 2 + 2)  # per setting: 10 metrics over all, 2 types, 2 sources
    shown = format_side_by_side(table)
    assert list(shown.columns) == ["setting", "type", "source", "metric", "model", "baseline", "difference", "95% CI",
                                   "method"]
    assert tuple(shown.iloc[13][["source", "model", "baseline", "difference"]]) == ("b", "0.0000", "0.5000", "-0.5000")
    assert set(plain["source"]) == {"all"} and len(plain) == 2 * (10 + 2)
    assert "source" not in format_side_by_side(plain).columns  # one dataset: the table it printed before


def old_spec(spec: TableSpec) -> TableSpec:
    """``spec`` as it was before the ``source`` column."""
    return TableSpec(spec.name, spec.schema.remove(spec.schema.get_field_index("source")), spec.partition_columns)


def test_a_database_made_before_the_source_column_gains_it_keeps_its_rows_and_takes_new_ones(tmp_path):
    path = str(tmp_path / "old.duckdb")
    plain = outcome([True, False, True, False, False], [(True, False)] * 5, mixture=False)
    old_tables = [old_spec(spec) if spec.name != "eval_runs" else spec for spec in EVAL_TABLES]
    with duckdb.connect(path) as conn:  # an older version's tables, and an eval written by it
        ensure_tables(conn, old_tables)
        writes = eval_tables("old-eval", [RoleEvaluation(EvalRunRecord.of(role, role, plain), plain)
                                          for role in ("model", "baseline")], compare_outcomes(plain, plain, 50))
        old = {spec.name: spec for spec in old_tables}
        replace_partitions(conn, [write._replace(spec=old[write.spec.name], rows=write.rows.drop_columns("source"))
                                  if "source" in write.rows.column_names else write for write in writes])
    with duckdb.connect(path) as conn:
        create_eval_views(conn)  # what every writer of the eval tables runs first
        assert write(conn, "mix-eval", MODEL, BASELINE) == [2, 30, 20, 10]
        assert conn.execute("SELECT source, count(*) FROM eval_metrics GROUP BY ALL ORDER BY ALL").fetchall() == [
            ("a", 4), ("all", 12), ("b", 4), (None, 12)]  # the old eval's 12 rows hold NULL
        assert conn.execute("SELECT count(*) FROM eval_samples WHERE source IS NULL").fetchone()[0] == 30
        old_table = side_by_side(conn, "old-eval")
        assert set(old_table["source"]) == {"all"} and len(old_table) == 2 * (10 + 2)
        assert old_table.iloc[0]["model"] == pytest.approx(0.4)
        old_view = conn.execute("SELECT source, model_accuracy, model_pass_at_1 FROM eval_vs_baseline WHERE eval_id = "
                                "'old-eval' AND setting = 'greedy_pass1' AND question_type = 'all'").fetchall()
        assert old_view == [("all", pytest.approx(0.4), pytest.approx(0.4))]
        new = side_by_side(conn, "mix-eval")
        assert list(new.loc[new["source"] != "all", "source"]) == ["a", "b", "a", "b"]


def test_without_ensure_tables_an_old_table_refuses_the_rows_with_a_source():
    """The check above is real: it is ``ensure_tables`` (run by ``create_eval_views``) that adds the column."""
    with duckdb.connect(":memory:") as conn:
        ensure_tables(conn, [old_spec(EVAL_METRICS)])
        rows = EVAL_METRICS.rows(MODEL.metrics, eval_id="e", role="model", distribution=None)
        with pytest.raises(duckdb.BinderException, match="source"):
            replace_partitions(conn, [PartitionWrite(EVAL_METRICS, {"eval_id": "e"}, rows)])



SHAPES = ["yes", "no", "yes", "yes"]  # "Is shape n red?": the yes-sayer gets 3 of 4
TEXTS = ["yes", "no", "no"]  # "Is n even?": 1 of 3


@pytest.fixture
def mixture(tmp_path):
    """4 shapes (each with an image) and 3 texts (text only), interleaved by seed 0."""
    Image.new("RGB", (2, 2), (255, 0, 0)).save(tmp_path / "red.png")
    shapes, texts = tmp_path / "shapes.jsonl", tmp_path / "texts.jsonl"
    shapes.write_text("".join(json.dumps({"id": f"s{n}", "question": f"Is shape {n} red?", "answer": answer,
                                          "image": "red.png"}) + "\n" for n, answer in enumerate(SHAPES)))
    texts.write_text("".join(json.dumps({"id": f"t{n}", "question": f"Is {n} even?", "answer": answer}) + "\n"
                             for n, answer in enumerate(TEXTS)))
    return mixture_env({"shapes": lambda limit, seed: make_env("jsonl", path=str(shapes), limit=limit, seed=seed),
                        "texts": lambda limit, seed: make_env("jsonl", path=str(texts), limit=limit, seed=seed,
                                                              allow_no_image=True)},
                       weights=(1, 1), limit=7, seed=0, name="mix")  # 3.5 + 3.5: 4 shapes (the earlier), 3 texts


def test_evaluate_model_on_a_mixture_names_each_response_s_source_and_reports_each(yes_vlm, tiny_vlm, mixture):
    torch.set_num_threads(1)
    model = evaluate_model(yes_vlm, mixture, range(7), (GREEDY,), max_new_tokens=3, batch_size=8)
    assert [s.source for s in model.samples] == [item.dataset for item in mixture.items]
    assert [s.response for s in model.samples] == ["yes"] * 7
    per_source = [(m.source, m.questions, m.n_correct, m.accuracy) for m in model.metrics if m.source != "all"]
    assert per_source == [("shapes", 4, 3, 0.75), ("texts", 3, 1, pytest.approx(1 / 3))]
    baseline = evaluate_model(tiny_vlm, mixture, range(7), (GREEDY,), max_new_tokens=3, batch_size=8)
    assert baseline.metric(GREEDY.name, source="shapes").accuracy == 0.0  # random weights: never one word
    compared = {c.source: (c.questions, c.b, c.c, c.method) for c in compare_outcomes(model, baseline)}
    assert compared == {"all": (7, 4, 0, "mcnemar_exact"), "shapes": (4, 3, 0, "mcnemar_exact"),
                        "texts": (3, 1, 0, "mcnemar_exact")}
    one = evaluate_model(yes_vlm, mixture.parts["shapes"], range(4), (GREEDY,), max_new_tokens=3, batch_size=8)
    assert {s.source for s in one.samples} == {None} and {m.source for m in one.metrics} == {"all"}
    assert one.metric(GREEDY.name).accuracy == 0.75
