"""An eval's rejected dataset rows: counted in ``eval_runs``, listed in ``rejected_rows`` under the eval id,
and a dataset with no usable row refused in one line naming it."""

from __future__ import annotations

import json

import duckdb
import pytest

from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.config.fields import ConfigError
from aerorl_ops.envs.configured import dataset_env
from aerorl_ops.eval_metrics.sampling import SamplingSetting
from aerorl_ops.eval_runner.eval_rows import EvalRunRecord, RoleEvaluation
from aerorl_ops.eval_runner.model_vs_baseline import EVAL_STAGE, ModelComparison
from aerorl_ops.eval_runner.runner import EvalOutcome, SampleRecord
from aerorl_ops.eval_runner.summaries import setting_metrics
from aerorl_ops.rows.load_result import RejectedRow
from aerorl_ops.storage.duckdb_store import ensure_tables, replace_partitions
from aerorl_ops.storage.eval_schema import EVAL_TABLES
from aerorl_ops.storage.schema import REJECTED_ROWS

GREEDY = SamplingSetting("greedy_pass1", greedy=True)
SAMPLES = (SampleRecord("greedy_pass1", 0, "q1", None, 0, "red", True, 1.0, 1, False, False),)
OUTCOME = EvalOutcome((0,), (GREEDY,), 4, 0, SAMPLES, tuple(setting_metrics(GREEDY, list(SAMPLES), 4)),
                      {"greedy_pass1": 1.0})
REJECTED = (RejectedRow("d.jsonl", "d.jsonl#line=2", "q2", "no answers"),
            RejectedRow("d.jsonl", "d.jsonl#line=3", "q3", "image file not found: /d/x.png"))
OLD_EVAL_RUNS = ("CREATE TABLE eval_runs (eval_id VARCHAR NOT NULL, role VARCHAR NOT NULL, model VARCHAR NOT NULL, "
                 "model_source VARCHAR, dataset VARCHAR, split VARCHAR, questions INTEGER, settings JSON, "
                 "max_new_tokens INTEGER, seed BIGINT, training_run_id VARCHAR, step INTEGER, device VARCHAR, "
                 "started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ, wall_s DOUBLE, config JSON)")


def comparison(eval_id: str, rejected: tuple[RejectedRow, ...]) -> ModelComparison:
    def role(name: str) -> RoleEvaluation:
        return RoleEvaluation(EvalRunRecord.of(name, f"{name}-key", OUTCOME, dataset="shapes",
                                               rejected_rows=len(rejected)), OUTCOME)
    return ModelComparison(eval_id, role("model"), role("baseline"), (), "shapes", rejected)


def test_an_eval_counts_and_lists_its_rejections_and_a_table_made_before_gains_the_column():
    conn = duckdb.connect()
    conn.execute(OLD_EVAL_RUNS)
    conn.execute("INSERT INTO eval_runs (eval_id, role, model) VALUES ('old', 'model', 'm')")
    ensure_tables(conn, (*EVAL_TABLES, REJECTED_ROWS))
    replace_partitions(conn, comparison("eval-1", REJECTED).writes())
    replace_partitions(conn, comparison("eval-2", ()).writes())
    assert conn.execute("SELECT eval_id, role, rejected_rows FROM eval_runs ORDER BY ALL").fetchall() == [
        ("eval-1", "baseline", 2), ("eval-1", "model", 2), ("eval-2", "baseline", 0), ("eval-2", "model", 0),
        ("old", "model", None)]
    assert conn.execute("SELECT * FROM rejected_rows ORDER BY locator").fetchall() == [
        ("eval-1", EVAL_STAGE, "shapes", "d.jsonl#line=2", "q2", "no answers"),
        ("eval-1", EVAL_STAGE, "shapes", "d.jsonl#line=3", "q3", "image file not found: /d/x.png")]
    replace_partitions(conn, comparison("eval-1", REJECTED[:1]).writes())  # a rerun replaces its own rows
    assert conn.execute("SELECT run_id, locator FROM rejected_rows").fetchall() == [("eval-1", "d.jsonl#line=2")]


def test_an_eval_dataset_without_a_usable_row_is_one_config_error_naming_it(tmp_path):
    path = tmp_path / "shapes.jsonl"
    path.write_text(json.dumps({"id": "a", "question": "Colour?", "image": "missing.png"}) + "\n")
    dataset = DatasetSettings("shapes", kind="jsonl", split="test", limit=5, path=str(path))
    with pytest.raises(ConfigError) as error:
        dataset_env(dataset)
    assert str(error.value).startswith(f"dataset 'shapes' (file {path}) has no usable row: the 1 row read was "
                                       "rejected: image file not found (1); the first, ")


def test_the_error_names_the_dataset_as_the_config_does():
    """A docvqa kind names itself 'docvqa'; the eval names the [datasets.<name>] table instead."""
    dataset = DatasetSettings("my_docs", kind="docvqa", split="validation", limit=0)
    with pytest.raises(ConfigError, match=r"^dataset 'my_docs' \(synthetic validation rows, limit 0\) has no usable "
                                          r"row: no row was read"):
        dataset_env(dataset)
