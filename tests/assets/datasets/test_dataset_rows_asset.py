"""The plain function the dataset rows assets wrap: a configured dataset's rows, with this run's overrides."""

from __future__ import annotations

from aerorl_ops.config.datasets import DatasetSettings
from assets.datasets.rows import DatasetRowsConfig, load_rows

CHARTQA = DatasetSettings("chartqa", kind="chartqa", split="validation", limit=48)
DOCVQA = DatasetSettings("docvqa", kind="docvqa", split="validation", limit=3, seed=0)


def test_synthetic_rows_follow_limit_and_seed():
    result = load_rows(CHARTQA, DatasetRowsConfig(limit=2, seed=5, split="test"))
    assert [(r.dataset, r.split) for r in result.rows] == [("chartqa", "test")] * 2
    assert not result.rejected
    default = load_rows(DOCVQA, DatasetRowsConfig())  # the table's limit, split and seed
    assert [(r.dataset, r.split) for r in default.rows] == [("docvqa", "validation")] * 3
    seeded_7 = DatasetSettings("docvqa", kind="docvqa", split="validation", limit=3, seed=7)
    assert load_rows(seeded_7, DatasetRowsConfig(seed=0)).rows == default.rows  # a run's seed 0 is honoured
    assert load_rows(seeded_7, DatasetRowsConfig()).rows != default.rows  # the table's seed 7 is used
