"""The evaluation job end to end on the embedded default: a checkpoint that answers "yes" against the
tiny model, on 8 easy-VQA questions. Its greedy accuracy is the share of "yes" answers, the tiny model's is
0, so every table and the comparison view hold numbers known in advance."""

from __future__ import annotations

import base64

import dagster as dg
import duckdb
import pytest

from aerorl_ops.envs.configured import dataset_env, dataset_settings
from aerorl_ops.eval_metrics.paired import mcnemar_exact
from aerorl_pipeline.definitions import build_definitions
from assets.project import BENCHMARK_CONFIG_PATH, benchmark_config

QUESTIONS = 8
RUN = {"n": QUESTIONS, "samples": 4, "k": 2, "max_new_tokens": 4, "batch_size": 16, "resamples": 500}


def run_eval(env, **config) -> dg.ExecuteInProcessResult:
    job = build_definitions(BENCHMARK_CONFIG_PATH, env.resources).resolve_job_def("evaluation")
    return job.execute_in_process(instance=env.instance, run_config={"ops": {"eval_run": {"config": config}}},
                                  raise_on_error=False)


def rows(conn, sql: str, *parameters) -> list[dict]:
    cursor = conn.execute(sql, list(parameters))
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, dagster_env_factory, yes_model_dir):
    env = dagster_env_factory(tmp_path_factory.mktemp("eval_job"))
    result = run_eval(env, model=str(yes_model_dir), baseline="tiny-qwen2-vl", **RUN)
    yield env, result
    env.instance.dispose()


@pytest.fixture(scope="module")
def yes_answers() -> int:
    questions = dataset_env(dataset_settings("easy_vqa", benchmark_config(), "", QUESTIONS))
    return sum(item.answers[0] == "yes" for item in questions.items)


def test_the_job_fills_every_eval_table(evaluated, yes_model_dir):
    env, result = evaluated
    assert result.success
    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        runs = rows(conn, "SELECT role, model, dataset, split, questions, max_new_tokens FROM eval_runs ORDER BY role")
        assert runs == [
            {"role": "baseline", "model": "tiny-qwen2-vl", "dataset": "easy_vqa", "split": "test",
             "questions": QUESTIONS, "max_new_tokens": 4},
            {"role": "model", "model": str(yes_model_dir), "dataset": "easy_vqa", "split": "test",
             "questions": QUESTIONS, "max_new_tokens": 4}]
        per_setting = rows(conn, "SELECT role, setting, count(*) AS n FROM eval_samples GROUP BY ALL ORDER BY ALL")
        assert [(r["setting"], r["n"]) for r in per_setting if r["role"] == "model"] == [
            ("high_temp_pass2", 4 * QUESTIONS), ("low_temp_pass1", QUESTIONS), ("medium_temp_pass1", QUESTIONS)]
        types = conn.execute("SELECT count(DISTINCT question_type) FROM eval_samples").fetchone()[0]
        assert conn.execute("SELECT count(*) FROM eval_metrics").fetchone()[0] == 2 * 3 * (1 + types)
        assert conn.execute("SELECT count(*) FROM eval_comparisons").fetchone()[0] == 3 * (1 + types)


def test_the_view_compares_the_two_models_on_the_same_questions(evaluated, yes_answers):
    env, _ = evaluated
    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        view = {r["setting"]: r for r in rows(conn, "SELECT * EXCLUDE (started_at) FROM eval_vs_baseline "
                                                    "WHERE question_type = 'all'")}
        assert set(view) == {"high_temp_pass2", "medium_temp_pass1", "low_temp_pass1"}
        near_greedy = view["low_temp_pass1"]  # top-p 0.001 keeps only the top token: "yes" then EOS
        assert near_greedy["model_accuracy"] == pytest.approx(yes_answers / QUESTIONS)
        assert near_greedy["baseline_accuracy"] == 0.0
        assert near_greedy["difference"] == pytest.approx(yes_answers / QUESTIONS)
        assert (near_greedy["method"], near_greedy["p_value"]) == ("mcnemar_exact", pytest.approx(2 / 2**yes_answers))
        expected = mcnemar_exact([1] * yes_answers + [0] * (QUESTIONS - yes_answers), [0] * QUESTIONS)
        assert (near_greedy["ci_low"], near_greedy["ci_high"]) == pytest.approx((expected.ci_low, expected.ci_high))
        assert (near_greedy["model_mean_length"], near_greedy["model_length_clip_ratio"]) == (1.0, 0.0)
        assert near_greedy["baseline_length_clip_ratio"] == 1.0  # random weights never stop within 4 tokens
        assert view["high_temp_pass2"]["method"] == "paired_bootstrap"
        # the view's accuracies are those of the samples themselves (pass@1 settings: the share correct)
        from_samples = {(r["role"], r["setting"]): r["accuracy"] for r in rows(
            conn, "SELECT role, setting, avg(correct::INT) AS accuracy FROM eval_samples GROUP BY ALL")}
        for setting in ("medium_temp_pass1", "low_temp_pass1"):
            assert view[setting]["model_accuracy"] == pytest.approx(from_samples["model", setting])
            assert view[setting]["baseline_accuracy"] == pytest.approx(from_samples["baseline", setting])
        assert view["high_temp_pass2"]["model_pass_at_1"] == pytest.approx(from_samples["model", "high_temp_pass2"])


def test_the_materialization_shows_the_table_and_the_figure(evaluated):
    env, result = evaluated
    (event,) = result.get_asset_materialization_events()
    metadata = event.materialization.metadata
    assert metadata["questions"].value == QUESTIONS
    table = metadata["comparison"].value
    assert "| pass@2 " in table and "mcnemar_exact" in table and "95% CI" in table and "yes_no" in table
    figure = metadata["accuracy_by_setting_png"].value
    assert figure.startswith(str(env.root / "plots" / "eval"))
    with open(figure, "rb") as png:
        data = png.read()
    assert data.startswith(b"\x89PNG") and len(data) > 2000
    assert base64.b64encode(data).decode() in metadata["accuracy_by_setting"].value


def test_a_rerun_replaces_the_eval_rows(evaluated, yes_model_dir):
    env, first = evaluated
    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        before = conn.execute("SELECT count(*) FROM eval_samples").fetchone()[0]
    again = run_eval(env, model=str(yes_model_dir), baseline="tiny-qwen2-vl", **RUN)
    assert again.success
    eval_ids = [r.get_asset_materialization_events()[0].materialization.metadata["eval_id"].value
                for r in (first, again)]
    assert eval_ids[0] == eval_ids[1]
    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM eval_samples").fetchone()[0] == before
        assert conn.execute("SELECT count(DISTINCT eval_id) FROM eval_runs").fetchone()[0] == 1


@pytest.mark.parametrize(("config", "message"), [
    ({"model": "no-such-model"}, "model 'no-such-model' is neither a model key"),
    ({"dataset": "mnist"}, "unknown dataset 'mnist'"),
    ({"split": "dev"}, "unknown split 'dev'"),
    ({"samples": 2, "k": 4}, "k=4 exceeds samples=2"),
])
def test_bad_inputs_fail_the_run_naming_them(tmp_path, dagster_env_factory, config, message):
    env = dagster_env_factory(tmp_path)
    result = run_eval(env, **{**RUN, **config})
    assert not result.success
    (failure,) = result.get_step_failure_events()
    assert message in failure.step_failure_data.error.message
    env.instance.dispose()
