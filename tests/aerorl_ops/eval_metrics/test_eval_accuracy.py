import math

import pytest

from aerorl_ops.eval_metrics.accuracy import Accuracy, accuracy_report


def test_accuracy_report_counts_untyped_items_only_overall():
    report = accuracy_report([("a", True), (None, False), ("a", False), ("b", True)])

    assert report.overall == Accuracy(2, 4)
    assert dict(report.by_type) == {"a": Accuracy(1, 2), "b": Accuracy(1, 1)}
    assert (Accuracy(0, 0).accuracy, Accuracy(0, 0).standard_error) == (0.0, 0.0)
    assert Accuracy(1, 4).standard_error == pytest.approx(math.sqrt(0.25 * 0.75 / 4), abs=1e-15)
