"""Each benchmark's standard metric, chosen by the record's ``metadata.dataset``.

DocVQA records get ANLS, ChartQA records relaxed accuracy (see ``aerorl_ops.metrics``);
records of other datasets, or without a reference, get none. These are reported beside
the reward, never added into it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from aerorl_ops.rewards.context import RewardCallable, RewardContext
from aerorl_ops.rewards.stack import run_component
from aerorl_ops.rewards.verifiers import AnlsVerifierReward, RelaxedAccuracyVerifierReward

DATASET_METRICS: Mapping[str, RewardCallable] = {
    "docvqa": AnlsVerifierReward(name="anls"),
    "chartqa": RelaxedAccuracyVerifierReward(name="relaxed_accuracy"),
}
METRIC_NAMES = tuple(metric.name for metric in DATASET_METRICS.values())


class MetricValue(NamedTuple):
    """One record's standard metric."""

    name: str
    value: float


def dataset_metric(context: RewardContext) -> MetricValue | None:
    """The record's benchmark metric, or None when its dataset has none or it has no reference.

    >>> dataset_metric(RewardContext("q", "Paris", reference="paris", metadata={"dataset": "docvqa"}))
    MetricValue(name='anls', value=1.0)
    >>> dataset_metric(RewardContext("q", "12", reference="12", metadata={"dataset": "other"})) is None
    True
    """
    metric = DATASET_METRICS.get(context.metadata.get("dataset"))
    if metric is None:
        return None
    result = run_component(metric, context)
    if result.details.get("reason") == "missing_reference":
        return None
    return MetricValue(result.name, result.score)


def summarize_metrics(values: Iterable[MetricValue | None]) -> dict[str, dict[str, Any]]:
    """Count and mean (6 places) of each metric over the records that have it.

    >>> summarize_metrics([MetricValue("anls", 1.0), None, MetricValue("anls", 0.5)])
    {'anls': {'count': 2, 'mean': 0.75}}
    """
    totals: dict[str, list[float]] = {}
    for value in values:
        if value is not None:
            totals.setdefault(value.name, []).append(value.value)
    return {name: {"count": len(scores), "mean": round(sum(scores) / len(scores), 6)}
            for name, scores in totals.items()}
