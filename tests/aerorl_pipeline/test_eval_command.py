"""`aerorl eval`: bad input is a configuration error naming it (exit 2), before any model loads; a good
one runs the evaluation job and prints the side-by-side table."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from aerorl_pipeline import cli


@pytest.fixture
def config(tmp_path, tiny_model_dir) -> Path:
    path = tmp_path / "eval.toml"
    path.write_text(f"""
[benchmark]
batch_sizes = [1]

[models.tiny]
source = "{tiny_model_dir}"

[datasets.easy_vqa]
kind = "easy_vqa"
split = "test"
limit = 48

[eval]
model = "tiny"
baseline = "tiny"
""")
    return path


@pytest.mark.parametrize(("flags", "message"), [
    (["--model", "no-such-model"], "model 'no-such-model' is neither a model key of"),
    (["--baseline", "also-missing"], "baseline 'also-missing' is neither a model key of"),
    (["--model", "no-such-run@7"], "checkpoint no-such-run@7: training run 'no-such-run' has no complete checkpoint"),
    (["--dataset", "mnist"], "unknown dataset 'mnist'"),
    (["--split", "dev"], "unknown split 'dev'"),
    (["--samples", "2", "--k", "4"], "k=4 exceeds samples=2"),
    (["--n", "0"], "aerorl eval: setting '--n' must be a positive integer"),
])
def test_bad_input_is_a_configuration_error_that_names_it(config, tmp_path, capsys, monkeypatch, flags, message):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "never_created"))
    assert cli.main(["eval", "--config", str(config), "--database", str(tmp_path / "r.duckdb"), *flags]) == 2
    error = capsys.readouterr().err
    assert error.startswith("aerorl: configuration error:") and message in error
    assert not (tmp_path / "never_created").exists() and not (tmp_path / "r.duckdb").exists()


def test_a_config_file_that_does_not_exist_is_a_configuration_error(tmp_path, capsys):
    assert cli.main(["eval", "--config", str(tmp_path / "missing.toml")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_an_eval_prints_the_side_by_side_table_and_lands_in_the_database(config, tmp_path, capsys, monkeypatch,
                                                                          yes_model_dir):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    database = tmp_path / "reports" / "aerorl.duckdb"
    argv = ["eval", "--config", str(config), "--database", str(database), "--model", str(yes_model_dir),
            "--n", "6", "--samples", "2", "--k", "2", "--max-new-tokens", "3", "--eval-id", "cli-test"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"eval cli-test: {yes_model_dir} vs baseline tiny on 6 questions of easy_vqa (test)")
    header = next(line for line in out.splitlines() if "metric" in line)
    assert header.split() == ["setting", "type", "metric", "model", "baseline", "difference", "95%", "CI", "method"]
    assert "mcnemar_exact" in out and "paired_bootstrap" in out and "yes_no" in out
    figure = tmp_path / "reports" / "plots" / "eval" / "cli-test" / "accuracy_by_setting.png"
    assert f"figure: {figure}" in out and figure.stat().st_size > 2000
    with duckdb.connect(str(database), read_only=True) as conn:
        models = conn.execute("SELECT DISTINCT model, baseline FROM eval_vs_baseline WHERE eval_id = 'cli-test'")
        assert models.fetchall() == [(str(yes_model_dir), "tiny")]
