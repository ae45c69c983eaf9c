"""Training curves and the eval figure, read from a report database: PNG files that exist and hold an image."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import duckdb
import pyarrow as pa
import pytest
from PIL import Image

from aerorl_ops.eval_metrics.sampling import SamplingSetting
from aerorl_ops.eval_runner.eval_rows import EvalRunRecord, RoleEvaluation, eval_tables
from aerorl_ops.eval_runner.paired_differences import compare_outcomes
from aerorl_ops.eval_runner.runner import EvalOutcome, SampleRecord
from aerorl_ops.eval_runner.summaries import setting_metrics
from aerorl_ops.reporting.eval_plots import eval_accuracy_png, save_eval_plots
from aerorl_ops.reporting.training_plots import TRAINING_FIGURES, save_training_plots, training_curves
from aerorl_ops.storage.duckdb_store import PartitionWrite, ensure_tables, replace_partitions
from aerorl_ops.storage.eval_schema import EVAL_TABLES
from aerorl_ops.storage.training_schema import TRAINING_EVALS, TRAINING_STEPS, TRAINING_TABLES

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SETTINGS = (SamplingSetting("high_temp_pass2", n=2, k=2), SamplingSetting("low_temp_pass1", temperature=0.01,
                                                                          top_p=0.001))


def outcome(right: int, reflect: int) -> EvalOutcome:
    """Four questions per setting; the first ``right`` responses correct, the first ``reflect`` reflecting."""
    samples = []
    for setting in SETTINGS:
        for row in range(4 * setting.n):
            question, sample_no = divmod(row, setting.n)
            samples.append(SampleRecord(setting.name, question, f"q{question}", "shape", sample_no,
                                        "wait" if row < reflect else "no", row < right, float(row < right), 3, False,
                                        row < reflect))
    metrics = [m for s in SETTINGS for m in setting_metrics(s, [x for x in samples if x.setting == s.name], 8)]
    return EvalOutcome((0, 1, 2, 3), SETTINGS, 8, 0, tuple(samples), tuple(metrics), {})


def table(spec, rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{name: row.get(name) for name in spec.column_names} for row in rows],
                                schema=spec.schema)


@pytest.fixture
def database(tmp_path):
    path = tmp_path / "report.duckdb"
    with duckdb.connect(str(path)) as conn:
        ensure_tables(conn, TRAINING_TABLES + EVAL_TABLES)
        steps = [{"run_id": "run-a", "step": s, "phase": "warmup" if s < 3 else "grpo", "loss": 1.0 / s,
                  "reward_mean": None if s < 3 else 0.1 * s, "kl": None if s < 3 else 0.01 * s,
                  "response_length": 4.0 - 0.2 * s} for s in range(1, 7)]
        evals = [{"run_id": "run-a", "step": 0, "phase": "no_image_prior", "accuracy": 0.3},
                 *[{"run_id": "run-a", "step": s, "phase": "rl", "accuracy": 0.1 * s} for s in (0, 3, 6)]]
        key = {"run_id": "run-a"}
        replace_partitions(conn, [PartitionWrite(TRAINING_STEPS, key, table(TRAINING_STEPS, steps)),
                                  PartitionWrite(TRAINING_EVALS, key, table(TRAINING_EVALS, evals))])
        for step, right in ((3, 2), (6, 5)):  # sampling-setting evals recorded by training
            result = outcome(right, reflect=step // 3)
            record = EvalRunRecord.of("model", "run-a", result, training_run_id="run-a", step=step)
            replace_partitions(conn, eval_tables(f"run-a/step-{step}", [RoleEvaluation(record, result)]))
        model, baseline = outcome(6, 1), outcome(2, 0)
        started = datetime(2026, 1, 1, tzinfo=UTC)
        replace_partitions(conn, eval_tables("eval-1", [
            RoleEvaluation(EvalRunRecord.of("model", "data/checkpoints/run-a/final", model, started_at=started), model),
            RoleEvaluation(EvalRunRecord.of("baseline", "tiny-qwen2-vl", baseline, started_at=started), baseline),
        ], compare_outcomes(model, baseline, 200)))
    return path


def assert_png(path) -> None:
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 2000
    with Image.open(io.BytesIO(data)) as image:
        assert image.size[0] >= 600 and image.size[1] == 400


def test_every_training_figure_is_written_for_a_run_with_evals(database, tmp_path):
    with duckdb.connect(str(database), read_only=True) as conn:
        curves = training_curves(conn, "run-a")
        saved = save_training_plots(conn, "run-a", tmp_path / "plots")
    assert sorted(saved) == sorted(TRAINING_FIGURES)
    for name, path in saved.items():
        assert path == tmp_path / "plots" / f"{name}.png"
        assert_png(path)
    assert list(curves.settings["step"]) == [3, 6, 3, 6]  # two settings x two recorded steps
    assert list(curves.settings["accuracy"])[-1] == 1.0  # low_temp_pass1 at step 6: all 4 responses right


def test_a_run_without_setting_evals_gets_the_figures_it_has_data_for(database, tmp_path):
    with duckdb.connect(str(database)) as conn:
        conn.execute("DELETE FROM eval_runs WHERE training_run_id = 'run-a'")
        saved = save_training_plots(conn, "run-a", tmp_path / "plots")
        assert sorted(saved) == ["accuracy_vs_step", "response_length_vs_step", "reward_kl_vs_step"]
        assert save_training_plots(conn, "no-such-run", tmp_path / "none") == {}
    with duckdb.connect(str(tmp_path / "empty.duckdb")) as empty:  # no tables at all
        assert save_training_plots(empty, "run-a", tmp_path / "empty") == {}


def test_the_eval_figure_has_bars_and_the_paired_difference(database, tmp_path):
    with duckdb.connect(str(database), read_only=True) as conn:
        saved = save_eval_plots(conn, "eval-1", tmp_path / "eval")
        assert saved == {"accuracy_by_setting": tmp_path / "eval" / "accuracy_by_setting.png"}
        assert_png(saved["accuracy_by_setting"])
        assert eval_accuracy_png(conn, "eval-1") == saved["accuracy_by_setting"].read_bytes()  # deterministic
        with pytest.raises(ValueError, match="nothing to plot"):
            eval_accuracy_png(conn, "missing")
