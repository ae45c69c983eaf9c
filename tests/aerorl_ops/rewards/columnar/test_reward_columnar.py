"""``evaluate_table`` gives ``evaluate_records``'s numbers exactly, whatever the records."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from aerorl_ops.replay.reader import iter_replay_records, read_replay
from aerorl_ops.rewards import (
    RewardContext,
    RewardResult,
    VerifierReward,
    WeightedRewardStack,
    build_default_reward_stack,
    build_reward_stack,
    evaluate_records,
    evaluate_table,
)
from aerorl_ops.rewards.columnar import columns as columns_module
from aerorl_ops.rewards.columnar.evaluate import round6
from aerorl_ops.rewards.replay_lines import REPLAY_SCHEMA

SUMMARY_NUMBERS = ("count", "average_reward", "pass_rate", "pass_threshold", "component_averages", "weights",
                   "best_examples", "worst_examples")


def assert_same_scores(reference: dict, columnar: dict) -> None:
    for key in SUMMARY_NUMBERS:
        assert columnar[key] == reference[key], key
    results = columnar["results"]
    assert results.column("id").to_pylist() == [item["id"] for item in reference["results"]]
    assert results.column("total").to_pylist() == [item["reward"]["total_reward"] for item in reference["results"]]
    for name in reference["component_averages"]:
        expected = [item["reward"]["components"][name] for item in reference["results"]]
        assert results.column(name).to_pylist() == expected, name


def brevity(context: RewardContext) -> float:
    return 1.0 / (1 + len(context.response) + len(context.metadata.get("claimed_entities", [])))


class Reference:
    name = "has_reference"

    def __call__(self, context: RewardContext) -> RewardResult:
        kind = type(context.reference).__name__
        return RewardResult(self.name, {"NoneType": 0.0, "str": 0.5, "list": 1.0}[kind])


STACKS = {
    "default": build_default_reward_stack,
    "json_and_regex": lambda: build_reward_stack(require_json=True, regex_pattern=r"\d", target_tokens=2,
                                                 latency_budget_ms=300.0, weights={"verifier": 0.7, "cost": 0.35}),
    "case_sensitive": lambda: WeightedRewardStack([VerifierReward(case_sensitive=True)], {"verifier": 0.3}),
    "anls_verifier": lambda: build_reward_stack(verifier_mode="anls"),
    "relaxed_verifier": lambda: build_reward_stack(verifier_mode="relaxed_accuracy"),
    "custom_callables": lambda: WeightedRewardStack(
        [*build_default_reward_stack().reward_functions, brevity, Reference()], weights={"brevity": 3.0}
    ),
}


@pytest.fixture(scope="module")
def tricky_file(tmp_path_factory, make_records, jsonl_writer):
    return jsonl_writer(tmp_path_factory.mktemp("replay") / "tricky.jsonl", make_records(seed=11, count=500))


@pytest.fixture(params=["deduplicated", "kept_as_is"])
def encoding(request, monkeypatch):
    """Run once with string columns dictionary-encoded and once with them kept as they are
    (what ``encode_if_repeating`` does for mostly distinct columns of large replays)."""
    if request.param == "kept_as_is":
        monkeypatch.setattr(columns_module, "SAMPLE_SIZE", 2)
        monkeypatch.setattr(columns_module, "MOSTLY_DISTINCT", -1.0)
    return request.param


@pytest.mark.parametrize("stack_name", sorted(STACKS))
def test_columnar_equals_per_record_on_tricky_records(tricky_file, stack_name, encoding):
    reference = evaluate_records(iter_replay_records(tricky_file), STACKS[stack_name](), pass_threshold=0.2, top_k=4)
    columnar = evaluate_table(read_replay(tricky_file), STACKS[stack_name](), pass_threshold=0.2, top_k=4)
    assert_same_scores(reference, columnar)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_columnar_equals_per_record_on_seeded_records(tmp_path, seed, make_records, jsonl_writer):
    path = jsonl_writer(tmp_path / "replay.jsonl", make_records(seed=seed, count=150))
    assert_same_scores(evaluate_records(iter_replay_records(path)), evaluate_table(read_replay(path)))


def test_rows_with_many_entities(tmp_path, jsonl_writer, make_records, encoding):
    crowded = {"id": "crowded", "response": "x", "metadata": {
        "evidence_entities": [f"{i}%" for i in range(60)], "claimed_entities": [f"0.{i:02d}" for i in range(60)]}}
    path = jsonl_writer(tmp_path / "r.jsonl", [*make_records(seed=4, count=20), crowded])
    assert_same_scores(evaluate_records(iter_replay_records(path)), evaluate_table(read_replay(path)))


def test_rows_repeating_their_entity_lists_are_grounded_once(tmp_path, jsonl_writer, make_records, monkeypatch):
    from aerorl_ops.rewards.columnar import kernels

    distinct = make_records(seed=9, count=40)
    records = [dict(record, id=f"{copy}-{record['id']}") for copy in range(10) for record in distinct]
    random.Random(0).shuffle(records)
    path = jsonl_writer(tmp_path / "r.jsonl", records)
    grounded_rows = []
    original = kernels._grounding
    monkeypatch.setattr(kernels, "_grounding", lambda *args: grounded_rows.append(args[-1]) or original(*args))
    assert_same_scores(evaluate_records(iter_replay_records(path)), evaluate_table(read_replay(path)))
    assert grounded_rows and grounded_rows[0] <= 40


def test_results_table_has_id_total_and_one_column_per_component(tmp_path, jsonl_writer):
    path = jsonl_writer(tmp_path / "r.jsonl", [{"id": "a", "response": "stop", "reference": "stop"}])
    results = evaluate_table(read_replay(path))["results"]
    assert results.column_names == ["id", "total", "verifier", "grounding", "format", "cost"]
    assert results.to_pylist() == [
        {"id": "a", "total": 0.7, "verifier": 1.0, "grounding": 0.0, "format": 1.0, "cost": 1.0}
    ]


def test_replay_without_references_or_claims(tmp_path, jsonl_writer):
    path = jsonl_writer(tmp_path / "r.jsonl", [
        {"response": "a"},
        {"response": "b", "reference": []},
        {"response": "c", "metadata": {"evidence_entities": ["x"]}},
    ])
    columnar = evaluate_table(read_replay(path))
    assert_same_scores(evaluate_records(iter_replay_records(path)), columnar)
    assert columnar["results"].column("total").to_pylist() == [0.3, 0.3, 0.3]


def test_empty_table_gives_the_empty_summary():
    summary = evaluate_table(REPLAY_SCHEMA.empty_table())
    assert summary["count"] == 0 and summary["results"] == []


def test_table_without_replay_columns_is_refused():
    with pytest.raises(ValueError, match="lacks columns"):
        evaluate_table(pa.table({"response": ["x"]}))


def test_custom_component_with_changing_names_is_refused(tmp_path, jsonl_writer):
    path = jsonl_writer(tmp_path / "r.jsonl", [{"response": "a"}, {"response": "bb"}])
    stack = WeightedRewardStack([lambda c: RewardResult(c.response, 1.0)], {})
    with pytest.raises(ValueError, match="several names"):
        evaluate_table(read_replay(path), stack)


def test_round6_equals_python_round_including_near_ties():
    rng = random.Random(5)
    values = [rng.uniform(-3, 3) for _ in range(2000)]
    values += [(k + 0.5) / 1e6 for k in range(-500, 500)]  # ties in decimal, near-ties in binary
    values += [0.0, -0.0, 1e9 + 0.0000005, float("inf"), -float("inf")]
    assert round6(np.array(values)).tolist() == [round(v, 6) for v in values]
