"""Scoring a partition's generations: AeroRL's reward components, the standard metrics, the manual baseline.

Expected numbers are worked out by hand from ``aerorl_ops.rewards`` with the benchmark's default
settings: weights verifier .4, grounding .3, format .2, cost .1; JSON required; 24 target words;
2000 ms latency budget; pass at total >= 0.3.
"""

from __future__ import annotations

import doctest
import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aerorl_ops.config.benchmark import RewardSettings
from aerorl_ops.config.rewards import REWARD_COMPONENT_NAMES
from aerorl_ops.generation.generations_table import GENERATION_SCHEMA, claimed_entities
from aerorl_ops.rewards.evaluate import evaluate_records
from aerorl_ops.rewards.verifiers import prediction_text
from aerorl_ops.scoring.partition_scores import (
    SCORE_SCHEMA,
    is_correct,
    manual_pass,
    reward_config,
    reward_stack_for,
    score_generations,
    standard_metric,
)

SETTINGS = RewardSettings()


def generation(sample_id: str, dataset: str, response: str, reference: list[str], evidence: list[str],
               latency_ms: float) -> dict:
    return {"sample_id": sample_id, "dataset": dataset, "prompt": "Q?", "response": response,
            "raw_response": response + "<|im_end|>", "reference": reference, "evidence_entities": evidence,
            "claimed_entities": claimed_entities(response), "latency_ms": latency_ms, "batch_latency_ms": 900.0,
            "generated_tokens": 5, "prompt_text_tokens": 40, "vision_tokens": 121, "batch_index": 0,
            "batch_size": 3}


GENERATIONS = pa.Table.from_pylist([
    # contains "42" (verifier .5); claims "42", which is evidence (grounding 1); JSON (format 1);
    # 2 words, 100 ms (cost 1): .4*.5 + .3 + .2 + .1 = 0.8
    generation("doc-1", "docvqa", '{"answer": "42"}', ["42", "forty-two"], ["42", "Total:"], 100.0),
    # no alias in it (verifier -.5); claims nothing (grounding 0); not JSON (format 1-1.3 = -.3);
    # 4 words, 3000 ms = 1.5x budget (cost 1-.5 = .5): -.2 + 0 - .06 + .05 = -0.21
    generation("chart-1", "chartqa", "The answer is 7", ["12%", "12"], ["12%"], 3000.0),
    # "12%" is not in the text (verifier -.5); "0.12" is an alias of evidence "12%" (grounding 1);
    # JSON (format 1); cost 1: -.2 + .3 + .2 + .1 = 0.4
    generation("chart-2", "chartqa", '{"answer": "0.12"}', ["12%"], ["12%", "2020"], 500.0),
], schema=GENERATION_SCHEMA)


@pytest.fixture(scope="module")
def scores() -> list[dict]:
    return score_generations(GENERATIONS, SETTINGS).to_pylist()


def test_components_and_totals_match_the_hand_computation(scores):
    got = {s["sample_id"]: (s["verifier"], s["grounding"], s["format"], s["cost"]) for s in scores}
    expected = {"doc-1": (0.5, 1.0, 1.0, 1.0), "chart-1": (-0.5, 0.0, -0.3, 0.5), "chart-2": (-0.5, 1.0, 1.0, 1.0)}
    assert got.keys() == expected.keys()
    for sample_id, components in expected.items():
        assert got[sample_id] == pytest.approx(components, abs=1e-12), sample_id
    assert [s["total_reward"] for s in scores] == pytest.approx([0.8, -0.21, 0.4], abs=1e-9)
    assert [s["passed"] for s in scores] == [True, False, True]


def test_rows_keep_their_order_dataset_and_settings(scores):
    assert [(s["sample_id"], s["dataset"]) for s in scores] == [
        ("doc-1", "docvqa"), ("chart-1", "chartqa"), ("chart-2", "chartqa")]
    config = json.loads(scores[0]["reward_config"])
    assert config["weights"] == SETTINGS.weights and config["pass_threshold"] == 0.3


def test_standard_metrics_grade_the_extracted_answer(scores):
    by_id = {s["sample_id"]: s for s in scores}
    assert (by_id["doc-1"]["anls"], by_id["doc-1"]["relaxed_accuracy"]) == (1.0, None)  # "42" vs "42"
    assert (by_id["chart-1"]["anls"], by_id["chart-1"]["relaxed_accuracy"]) == (None, 0.0)
    assert (by_id["chart-2"]["anls"], by_id["chart-2"]["relaxed_accuracy"]) == (None, 1.0)  # 0.12 == 12%


def test_manual_baseline_column(scores):
    assert [s["manual_pass"] for s in scores] == [True, False, False]


def test_settings_change_the_scores():
    verifier_only = RewardSettings(weights={"verifier": 1.0, "grounding": 0.0, "format": 0.0, "cost": 0.0},
                                   require_json=False, pass_threshold=0.5)
    scores = score_generations(GENERATIONS, verifier_only).to_pylist()
    assert [s["total_reward"] for s in scores] == [0.5, -0.5, -0.5]
    assert [s["format"] for s in scores] == [1.0, 1.0, 1.0]  # JSON no longer required
    assert [s["passed"] for s in scores] == [True, False, False]


def test_empty_generations_give_an_empty_score_table():
    assert score_generations(GENERATION_SCHEMA.empty_table(), SETTINGS).num_rows == 0


@pytest.mark.parametrize(("response", "references", "expected"), [
    ('{"answer": "12"}', ["12%", "12"], True),
    ("It is MAY 4", ["May 4"], True),
    ("", ["12"], False),
    ("anything", ["", "  "], False),  # a blank reference is contained in everything; it must not count
    ("12", [], False),
])
def test_manual_pass(response, references, expected):
    assert manual_pass(response, references) is expected


def test_standard_metric_by_dataset():
    assert standard_metric("docvqa", "Pariss", ["Paris"]) == (pytest.approx(5 / 6), None)
    assert standard_metric("chartqa", "10.4", ["7", "10"]) == (None, 1.0)
    assert standard_metric("docvqa", "x", []) == (None, None)
    assert standard_metric("other", "x", ["x"]) == (None, None)


def test_a_generation_without_a_response_is_refused_by_sample_id():
    broken = GENERATIONS.set_column(GENERATIONS.schema.get_field_index("response"), "response",
                                    pa.array([None, "x", "y"], pa.string()))
    with pytest.raises(ValueError, match=r"response is null for sample ids \['doc-1'\]"):
        score_generations(broken, SETTINGS)


# --- columnar scoring gives the per-record stack's numbers ----------------------------------------------

def per_record_scores(generations: pa.Table, reward_settings: RewardSettings) -> pa.Table:
    """The reference: each generation as an AeroRL replay record through ``evaluate_records``."""
    records = [{"id": g["sample_id"], "prompt": g["prompt"], "response": g["response"], "reference": g["reference"],
                "metadata": {name: g[name] for name in ("evidence_entities", "claimed_entities", "latency_ms",
                                                        "dataset", "raw_response")}}
               for g in generations.to_pylist()]
    results = evaluate_records(records, reward_stack_for(reward_settings),
                               pass_threshold=reward_settings.pass_threshold)["results"]
    rows = []
    for record, result in zip(records, results, strict=True):
        references = record["reference"] or []
        anls_score, relaxed = standard_metric(record["metadata"]["dataset"], prediction_text(record["response"]),
                                              references)
        total = result["reward"]["total_reward"]
        rows.append({"sample_id": record["id"], "dataset": record["metadata"]["dataset"],
                     **{name: result["reward"]["components"][name] for name in REWARD_COMPONENT_NAMES},
                     "total_reward": total, "passed": total >= reward_settings.pass_threshold,
                     "manual_pass": manual_pass(record["response"], references), "anls": anls_score,
                     "relaxed_accuracy": relaxed,
                     "correct": is_correct(record["metadata"]["dataset"], record["response"], references,
                                           anls_score, relaxed),
                     "reward_config": reward_config(reward_settings)})
    return pa.Table.from_pylist(rows, schema=SCORE_SCHEMA)


TEXT = st.lists(st.sampled_from(list("aB7 .%,-") + ["12", "İ", "é", "Σ", "\u00a0", '{"answer": "', '"}']),
                max_size=8).map("".join)
GENERATED = st.lists(st.fixed_dictionaries({
    "dataset": st.sampled_from(["docvqa", "chartqa", "easy_vqa"]),
    "response": TEXT,
    "reference": st.one_of(st.none(), st.lists(TEXT, max_size=3)),
    "evidence_entities": st.lists(TEXT, max_size=3),
    "latency_ms": st.floats(min_value=0.0, max_value=5000.0),
}), max_size=8)


@settings(max_examples=50, deadline=None)
@given(GENERATED, st.sampled_from([SETTINGS, RewardSettings(require_json=False, target_tokens=2,
                                                            latency_budget_ms=100.0, pass_threshold=0.0)]))
def test_columnar_scores_equal_the_per_record_stack(drawn, reward_settings):
    table = pa.Table.from_pylist([
        generation(f"s{i}", g["dataset"], g["response"], [], g["evidence_entities"], g["latency_ms"])
        | {"reference": g["reference"]} for i, g in enumerate(drawn)], schema=GENERATION_SCHEMA)
    expected = per_record_scores(table, reward_settings).to_pylist()
    assert score_generations(table, reward_settings).to_pylist() == expected


def test_the_module_examples_hold():
    import aerorl_ops.scoring.partition_scores as partition_scores

    result = doctest.testmod(partition_scores)
    assert result.failed == 0 and result.attempted > 0
