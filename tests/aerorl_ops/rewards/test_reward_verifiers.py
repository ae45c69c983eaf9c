"""Metric verifiers (ANLS, relaxed accuracy) and the per-dataset metrics of the replay."""

from __future__ import annotations

import pytest

from aerorl_ops.rewards import (
    VERIFIER_MODES,
    AnlsVerifierReward,
    RelaxedAccuracyVerifierReward,
    RewardContext,
    VerifierReward,
)
from aerorl_ops.rewards.dataset_metrics import MetricValue, dataset_metric, summarize_metrics
from aerorl_ops.rewards.verifiers import metric_references, prediction_text, verifier_for_mode


def test_modes_map_to_one_class_each():
    assert VERIFIER_MODES == {
        "match": VerifierReward, "anls": AnlsVerifierReward, "relaxed_accuracy": RelaxedAccuracyVerifierReward,
    }
    assert isinstance(verifier_for_mode("relaxed_accuracy"), RelaxedAccuracyVerifierReward)


def test_anls_verifier_grades_the_json_answer_not_the_raw_output():
    context = RewardContext("q", '{"answer": "Pariss"}', reference=["London", "Paris"],
                            metadata={"raw_response": '{"answer": "Pariss"}<|im_end|>'})
    result = AnlsVerifierReward()(context)
    assert result.name == "verifier"
    assert result.score == 0.8333333333333334  # 1 - 1/6
    assert result.details == {"anls": 0.8333333333333334, "reference_count": 2}


def test_anls_verifier_threshold_and_missing_reference():
    assert AnlsVerifierReward(threshold=0.9)(RewardContext("q", "Pariss", reference="Paris")).score == 0.0
    assert AnlsVerifierReward()(RewardContext("q", "x", reference=["  "])).details == {"reason": "missing_reference"}


def test_relaxed_accuracy_verifier_takes_the_best_reference():
    context = RewardContext("q", "10.4", reference=["7", "10"])
    assert RelaxedAccuracyVerifierReward()(context).score == 1.0
    assert RelaxedAccuracyVerifierReward(tolerance=0.01)(context).score == 0.0
    assert RelaxedAccuracyVerifierReward()(RewardContext("q", "x")).score == 0.0


def test_prediction_text_and_metric_references():
    assert prediction_text("wrapped", {"raw_response": 5}) == "wrapped"
    assert prediction_text('{"answer": "12%"}', {"raw_response": "junk"}) == "12%"
    assert metric_references((" 12 ", "", 3)) == [" 12 ", "3"]
    assert metric_references("  ") == []


def test_dataset_metric_by_dataset():
    docvqa = RewardContext("q", "paris", reference="Paris", metadata={"dataset": "docvqa"})
    chartqa = RewardContext("q", "12%", reference="0.12", metadata={"dataset": "chartqa"})
    assert dataset_metric(docvqa) == MetricValue("anls", 1.0)
    assert dataset_metric(chartqa) == MetricValue("relaxed_accuracy", 1.0)
    assert dataset_metric(RewardContext("q", "x", metadata={"dataset": "docvqa"})) is None
    assert dataset_metric(RewardContext("q", "x", reference="x")) is None


def test_summarize_metrics_rounds_means():
    values = [MetricValue("anls", 1.0), MetricValue("anls", 0.0), MetricValue("anls", 0.0), None,
              MetricValue("relaxed_accuracy", 1.0)]
    assert summarize_metrics(values) == {
        "anls": {"count": 3, "mean": 0.333333}, "relaxed_accuracy": {"count": 1, "mean": 1.0},
    }


@pytest.mark.parametrize("mode", sorted(VERIFIER_MODES))
def test_every_mode_scores_a_perfect_answer_one(mode):
    assert verifier_for_mode(mode)(RewardContext("q", "42", reference="42")).score == 1.0
