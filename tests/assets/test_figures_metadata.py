"""Training figures as asset metadata: saved beside the database, shown inline, a note where no data."""

from __future__ import annotations

import base64
from functools import partial

import duckdb
import pyarrow as pa

from aerorl_ops.reporting.training_plots import training_plots_dir
from aerorl_ops.rl.record.reporters import FiguresReporter
from aerorl_ops.storage.duckdb_store import PartitionWrite, ensure_tables, replace_partitions
from aerorl_ops.storage.training_schema import TRAINING_EVALS, TRAINING_STEPS, TRAINING_TABLES
from assets.figures import training_figures


def rows(spec, records: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{name: r.get(name) for name in spec.column_names} for r in records],
                                schema=spec.schema)


def test_training_figures_are_saved_under_plots_by_the_runs_reporter_and_inlined(tmp_path):
    database = tmp_path / "reports" / "aerorl.duckdb"
    database.parent.mkdir()
    key = {"run_id": "../run a"}
    steps = [{"run_id": "../run a", "step": s, "reward_mean": 0.1 * s, "kl": 0.01 * s, "response_length": 2.0}
             for s in (1, 2, 3)]
    evals = [{"run_id": "../run a", "step": s, "phase": "rl", "accuracy": 0.2 * s} for s in (0, 3)]
    with duckdb.connect(str(database)) as conn:
        ensure_tables(conn, TRAINING_TABLES)
        replace_partitions(conn, [PartitionWrite(TRAINING_STEPS, key, rows(TRAINING_STEPS, steps)),
                                  PartitionWrite(TRAINING_EVALS, key, rows(TRAINING_EVALS, evals))])
    folder = training_plots_dir(str(database), "../run a")
    assert training_figures(str(database), "../run a")["accuracy_vs_step"].value.startswith("_")  # not saved yet
    FiguresReporter(partial(duckdb.connect, str(database)), "../run a", folder).close()  # the run's end
    metadata = training_figures(str(database), "../run a")
    assert folder.parent == tmp_path / "reports" / "plots" / "training"  # the run id cannot climb out
    png = (folder / "accuracy_vs_step.png").read_bytes()
    assert metadata["accuracy_vs_step_png"].value == str(folder / "accuracy_vs_step.png")
    assert base64.b64encode(png).decode() in metadata["accuracy_vs_step"].value
    assert metadata["reflection_vs_step"].value == "_reflection vs step: nothing to plot_"
    assert "reflection_vs_step_png" not in metadata
