"""Every branch of AeroRL's four components, with hand-checked scores."""

from __future__ import annotations

import pytest

from aerorl_ops.rewards import CostReward, FormatReward, GroundingReward, RewardContext, VerifierReward


def ctx(response: str = "", reference=None, **metadata) -> RewardContext:
    return RewardContext(prompt="p", response=response, reference=reference, metadata=metadata)


# --- verifier ---------------------------------------------------------------------------


@pytest.mark.parametrize("reference", [None, "", "   ", [], ["", "  "]])
def test_verifier_without_a_usable_reference_scores_zero(reference):
    result = VerifierReward()(ctx("anything", reference))
    assert result.score == 0.0
    assert result.details == {"reason": "missing_reference"}


def test_verifier_exact_match_ignores_case_and_outer_whitespace():
    result = VerifierReward()(ctx("  STOP \n", " stop "))
    assert result.score == 1.0
    assert result.details == {
        "exact_match": True, "contains_reference": True, "matched_reference": "stop", "reference_count": 1,
    }


def test_verifier_exact_match_on_a_later_alias_wins_over_an_earlier_containment():
    result = VerifierReward()(ctx("april 15, 2014", ["april", "april 15,2014", "April 15, 2014"]))
    assert result.score == 1.0
    assert result.details["matched_reference"] == "April 15, 2014"
    assert result.details["reference_count"] == 3


def test_verifier_containment_scores_half_and_names_the_first_contained_alias():
    result = VerifierReward()(ctx("The sign says STOP now", ["go", "stop", "says"]))
    assert result.score == 0.5
    assert result.details == {
        "exact_match": False, "contains_reference": True, "matched_reference": "stop", "reference_count": 3,
    }


def test_verifier_miss_scores_minus_half():
    result = VerifierReward()(ctx("go", ["stop", "halt"]))
    assert result.score == -0.5
    assert result.details["matched_reference"] == ""


def test_verifier_case_sensitive_mode():
    assert VerifierReward(case_sensitive=True)(ctx("STOP", "stop")).score == -0.5
    assert VerifierReward(case_sensitive=True)(ctx("STOP sign", "STOP")).score == 0.5


def test_verifier_reads_non_string_reference_items_as_text():
    assert VerifierReward()(ctx("12", [12, None])).score == 1.0
    assert VerifierReward()(ctx("None", [None])).score == 1.0  # AeroRL's str(item)


# --- grounding --------------------------------------------------------------------------


@pytest.mark.parametrize("claimed", [None, [], ["", "  "]])
def test_grounding_without_claims_scores_zero(claimed):
    metadata = {"evidence_entities": ["a"]}
    if claimed is not None:
        metadata["claimed_entities"] = claimed
    result = GroundingReward()(ctx(**metadata))
    assert result.score == 0.0
    assert result.details == {"reason": "no_claimed_entities"}


def test_grounding_all_supported_scores_one_and_reports_counts():
    result = GroundingReward()(ctx(evidence_entities=["car", "red", ""], claimed_entities=["Red", "CAR"]))
    assert result.score == 1.0
    assert result.details == {"claimed": 2, "evidence": 2, "overlap": 2, "precision": 1.0}


def test_grounding_nothing_supported_scores_minus_one():
    result = GroundingReward()(ctx(evidence_entities=["adidas"], claimed_entities=["nike"]))
    assert result.score == -1.0
    assert result.details["overlap"] == 0


def test_grounding_two_of_three_claims_supported():
    result = GroundingReward()(ctx(evidence_entities=["Paris", "1990"], claimed_entities=["paris", "1990", "Rome"]))
    assert result.score == 0.33333333333333326  # 2 * (2/3) - 1 in floating point
    assert result.details["precision"] == 0.6667


def test_grounding_without_evidence_scores_minus_one():
    assert GroundingReward()(ctx(claimed_entities=["x"])).score == -1.0


@pytest.mark.parametrize(
    ("evidence", "claimed"),
    [
        ("42", "42%"),  # a percent also reads as its number
        ("0.42", "42%"),  # ... and as a fraction
        ("Mr. Alm", "Mr. Alm."),  # trailing punctuation
        ("next 2-3 weeks", "within the next 2-3 weeks"),  # stopwords
        ("7", "007"),  # numeric form
        ("a  b", "A\tB"),  # whitespace
        ("...", "!!"),  # AeroRL: token-less texts both reduce to ""
    ],
)
def test_grounding_alias_normalisation_matches(evidence, claimed):
    assert GroundingReward()(ctx(evidence_entities=[evidence], claimed_entities=[claimed])).score == 1.0


@pytest.mark.parametrize(("evidence", "claimed"), [("5", "-5"), ("2", "2-3"), ("1234", "1,234"), ("paris", "pari")])
def test_grounding_alias_normalisation_does_not_overreach(evidence, claimed):
    assert GroundingReward()(ctx(evidence_entities=[evidence], claimed_entities=[claimed])).score == -1.0


def test_grounding_counts_repeated_claims_separately():
    result = GroundingReward()(ctx(evidence_entities=["a b"], claimed_entities=["a b", "a b", "c"]))
    assert result.details == {"claimed": 3, "evidence": 1, "overlap": 2, "precision": 0.6667}


# --- format -----------------------------------------------------------------------------


def test_format_without_checks_is_one():
    result = FormatReward()(ctx("anything"))
    assert (result.score, result.details) == (1.0, {})


def test_format_json_required():
    assert FormatReward(require_json=True)(ctx('{"answer": "x"}')).details == {"json_valid": True}
    bad = FormatReward(require_json=True)(ctx("answer: x"))
    assert (bad.score, bad.details) == (-0.30000000000000004, {"json_valid": False})  # 1.0 - 1.3


def test_format_accepts_what_python_json_accepts():
    assert FormatReward(require_json=True)(ctx("NaN")).score == 1.0
    assert FormatReward(require_json=True)(ctx(" [1, 2] ")).score == 1.0


def test_format_regex_uses_search():
    assert FormatReward(regex_pattern="cat")(ctx("the cat sat")).details == {"regex_matched": True}
    miss = FormatReward(regex_pattern="^cat")(ctx("the cat sat"))
    assert (miss.score, miss.details) == (0.5, {"regex_matched": False})


def test_format_both_checks_failing_is_clipped_sum():
    result = FormatReward(require_json=True, regex_pattern=r"^\{")(ctx("cat"))
    assert result.score == -0.8
    assert result.details == {"json_valid": False, "regex_matched": False}


# --- cost -------------------------------------------------------------------------------


def test_cost_within_budgets_is_one():
    result = CostReward(target_tokens=3, latency_budget_ms=100)(ctx("one two three", latency_ms=100))
    assert result.score == 1.0
    assert result.details == {"token_count": 3, "latency_ms": 100.0, "target_tokens": 3, "latency_budget_ms": 100}


def test_cost_penalises_each_overrun_by_its_relative_excess():
    reward = CostReward(target_tokens=2, latency_budget_ms=100)
    assert reward(ctx("three short words")).score == 0.5
    assert reward(ctx("ok", latency_ms=150)).score == 0.5
    assert reward(ctx("three short words", latency_ms=150)).score == 0.0


def test_cost_matches_aerorl_example_value():
    assert CostReward()(ctx("The answer is cat", latency_ms=910)).score == 0.17999999999999994


def test_cost_is_clipped_at_minus_one():
    assert CostReward(target_tokens=1)(ctx("a b c d e f g h i j")).score == -1.0


def test_cost_defaults_and_degenerate_budgets():
    assert CostReward()(ctx("   ")).details["token_count"] == 0
    assert CostReward()(ctx("x")).details["latency_ms"] == 0.0
    assert CostReward(target_tokens=0)(ctx("a b")).score == 0.0  # divides by max(0, 1)
    assert CostReward(latency_budget_ms=0.0)(ctx("a", latency_ms=2.0)).score == 0.0  # by max(0.0, 1.0)
    assert CostReward(latency_budget_ms=100)(ctx("a", latency_ms="150")).score == 0.5  # float("150")
