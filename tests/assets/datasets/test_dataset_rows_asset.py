"""The plain function the dataset rows assets wrap: row loading from files or the synthetic generators."""

from __future__ import annotations

from assets.datasets.rows import DatasetRowsConfig, load_rows


def test_synthetic_rows_follow_limit_and_seed():
    result = load_rows("chartqa", DatasetRowsConfig(limit=2, seed=5, split="test"), default_count=48, default_seed=0)
    assert [(r.dataset, r.split) for r in result.rows] == [("chartqa", "test")] * 2
    assert not result.rejected
    default = load_rows("docvqa", DatasetRowsConfig(), default_count=3, default_seed=0)
    assert len(default.rows) == 3
    assert load_rows("docvqa", DatasetRowsConfig(seed=0), 3, 7).rows == default.rows  # seed 0 is honoured
    assert load_rows("docvqa", DatasetRowsConfig(), 3, 7).rows != default.rows
