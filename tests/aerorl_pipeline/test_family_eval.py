"""`aerorl eval --model <family folder> --baseline tiny`: a tiny checkpoint of every VLM family answers
the same 4 easy_vqa questions as the embedded model at MAYE's three settings, and the eval's rows land
in DuckDB (both roles, every response, the paired comparison)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from aerorl_pipeline import cli
from tests.aerorl_ops.models.family_params import family_params

QUESTIONS = 4
SAMPLES = 2  # responses per question at temperature 1.0; the two pass@1 settings take one each
MAX_NEW_TOKENS = 3


@pytest.fixture(scope="module")
def shared_dir(tmp_path_factory) -> Path:
    """The config, the Dagster home and the report database every family's eval shares (eval ids differ)."""
    return tmp_path_factory.mktemp("family_eval")


@pytest.fixture(scope="module")
def config(shared_dir, tiny_model_dir) -> Path:
    path = shared_dir / "eval.toml"
    path.write_text(f"""
[benchmark]
batch_sizes = [1]

[models.tiny]
source = "{tiny_model_dir}"

[datasets.easy_vqa]
kind = "easy_vqa"
split = "test"
limit = 48
""")
    return path


def query(database: Path, sql: str, params: list) -> list[tuple]:
    with duckdb.connect(str(database), read_only=True) as conn:
        return conn.execute(sql, params).fetchall()


@pytest.mark.parametrize("family", family_params(raises=AssertionError))  # Llama 4: `aerorl eval` exits 1
def test_a_family_checkpoint_is_evaluated_against_the_embedded_model(family, config, shared_dir, tiny_family_dir,
                                                                      capsys, monkeypatch):
    folder = tiny_family_dir(family)
    monkeypatch.setenv("DAGSTER_HOME", str(shared_dir / "dagster_home"))
    database, eval_id = shared_dir / "aerorl.duckdb", f"family-{family}"
    argv = ["eval", "--config", str(config), "--database", str(database), "--model", str(folder),
            "--baseline", "tiny", "--n", str(QUESTIONS), "--samples", str(SAMPLES), "--k", str(SAMPLES),
            "--max-new-tokens", str(MAX_NEW_TOKENS), "--resamples", "100", "--eval-id", eval_id]
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.startswith(f"eval {eval_id}: {folder} vs baseline tiny on {QUESTIONS} questions")

    runs = query(database, "SELECT role, model, questions, max_new_tokens FROM eval_runs WHERE eval_id = ? "
                           "ORDER BY role", [eval_id])
    assert runs == [("baseline", "tiny", QUESTIONS, MAX_NEW_TOKENS), ("model", str(folder), QUESTIONS, MAX_NEW_TOKENS)]
    samples = query(database, "SELECT role, count(*), count(DISTINCT item_index), max(response_tokens) "
                              "FROM eval_samples WHERE eval_id = ? GROUP BY role ORDER BY role", [eval_id])
    per_role = QUESTIONS * (SAMPLES + 1 + 1)
    assert [row[:3] for row in samples] == [("baseline", per_role, QUESTIONS), ("model", per_role, QUESTIONS)]
    assert all(row[3] <= MAX_NEW_TOKENS for row in samples)
    settings = query(database, "SELECT DISTINCT setting FROM eval_comparisons WHERE eval_id = ?", [eval_id])
    assert len(settings) == 3  # MAYE's three settings, each compared
