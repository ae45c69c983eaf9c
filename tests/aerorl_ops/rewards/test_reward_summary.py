"""``evaluate_records``: AeroRL's summary, checked against AeroRL's own published report."""

from __future__ import annotations

from aerorl_ops.rewards import build_reward_stack, evaluate_records

# examples/reward_replay_example.jsonl of sabdulmajid/aeroRL
AERORL_EXAMPLE = [
    {"id": "good-ocr", "prompt": 'What text appears on the sign? Return JSON {"answer":...}',
     "response": '{"answer":"stop"}', "reference": '{"answer":"stop"}',
     "metadata": {"evidence_entities": ["stop"], "claimed_entities": ["stop"], "latency_ms": 72}},
    {"id": "bad-grounding", "prompt": 'What brand logo is visible? Return JSON {"answer":...}',
     "response": '{"answer":"nike"}', "reference": '{"answer":"adidas"}',
     "metadata": {"evidence_entities": ["adidas"], "claimed_entities": ["nike"], "latency_ms": 340}},
    {"id": "bad-format", "prompt": 'Return JSON {"answer":...}', "response": "The answer is cat",
     "reference": '{"answer":"cat"}',
     "metadata": {"evidence_entities": ["cat"], "claimed_entities": ["cat"], "latency_ms": 910}},
]
AERORL_SETTINGS = dict(weights={"verifier": 0.45, "cost": 0.05}, require_json=True, regex_pattern=r"^\{.*\}$")


def test_matches_aerorl_report_for_its_example():
    # reports/reward-eval-example-2026-03-23.json of sabdulmajid/aeroRL
    summary = evaluate_records(AERORL_EXAMPLE, build_reward_stack(**AERORL_SETTINGS), pass_threshold=0.5, top_k=2)
    assert summary["count"] == 3
    assert summary["average_reward"] == 0.216333
    assert summary["pass_rate"] == 0.333333
    assert summary["pass_threshold"] == 0.5
    assert summary["component_averages"] == {"verifier": 0.0, "grounding": 0.333333, "format": 0.4, "cost": 0.726667}
    assert summary["weights"] == {"verifier": 0.45, "grounding": 0.3, "format": 0.2, "cost": 0.05}
    bad_format = {"id": "bad-format", "total_reward": -0.076,
                  "components": {"verifier": -0.5, "grounding": 1.0, "format": -0.8, "cost": 0.17999999999999994}}
    good = {"id": "good-ocr", "total_reward": 1.0,
            "components": {"verifier": 1.0, "grounding": 1.0, "format": 1.0, "cost": 1.0}}
    bad_grounding = {"id": "bad-grounding", "total_reward": -0.275,
                     "components": {"verifier": -0.5, "grounding": -1.0, "format": 1.0, "cost": 1.0}}
    assert summary["best_examples"] == [good, bad_format]
    assert summary["worst_examples"] == [bad_format, bad_grounding]
    assert [r["id"] for r in summary["results"]] == ["good-ocr", "bad-grounding", "bad-format"]
    assert summary["results"][2]["reward"]["details"]["format"] == {"json_valid": False, "regex_matched": False}


def test_stop_in_capitals_against_lowercase_reference():
    records = [{"id": "sample-1", "prompt": "What word is visible?", "response": "STOP", "reference": "stop",
                "metadata": {"evidence_entities": ["stop"], "claimed_entities": ["stop"], "latency_ms": 25}}]
    summary = evaluate_records(records)
    assert summary["results"][0]["reward"]["total_reward"] == 1.0
    assert summary["pass_rate"] == 1.0


def test_empty_input_summary():
    summary = evaluate_records([])
    assert summary == {
        "count": 0, "average_reward": 0.0, "pass_rate": 0.0, "pass_threshold": 0.3, "component_averages": {},
        "weights": {"verifier": 0.4, "grounding": 0.3, "format": 0.2, "cost": 0.1},
        "best_examples": [], "worst_examples": [], "results": [],
    }


def _records(responses: list[str]) -> list[dict]:
    return [{"id": f"r{i}", "response": text, "reference": "yes"} for i, text in enumerate(responses)]


def test_ranking_is_stable_and_slices_like_aerorl():
    records = _records(["yes", "no", "yes", "no"])  # totals 0.7, 0.2, 0.7, 0.2
    summary = evaluate_records(records, top_k=3)
    assert [e["id"] for e in summary["best_examples"]] == ["r0", "r2", "r1"]
    assert [e["id"] for e in summary["worst_examples"]] == ["r2", "r1", "r3"]
    assert [e["id"] for e in evaluate_records(records, top_k=9)["best_examples"]] == ["r0", "r2", "r1", "r3"]
    assert evaluate_records(records, top_k=0)["best_examples"] == []
    assert len(evaluate_records(records, top_k=0)["worst_examples"]) == 4  # AeroRL's [-0:] slice


def test_pass_threshold_is_inclusive():
    summary = evaluate_records(_records(["yes", "no"]), pass_threshold=0.7)
    assert summary["pass_rate"] == 0.5


def test_missing_fields_use_aerorl_defaults():
    summary = evaluate_records([{"response": "x"}])
    assert summary["results"][0]["id"] is None
    assert summary["results"][0]["reward"]["components"] == {
        "verifier": 0.0, "grounding": 0.0, "format": 1.0, "cost": 1.0}
