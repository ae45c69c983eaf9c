"""MAYE's reflection metrics, length metrics and their combination on hand-made responses."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aerorl_ops.eval_metrics.lengths import length_metrics
from aerorl_ops.eval_metrics.reflection import (
    REFLECTION_WORDS,
    ReflectionMetrics,
    has_reflection,
    reflection_metrics,
    reflection_ratios,
    reflection_word_counts,
)
from aerorl_ops.eval_metrics.response_metrics import response_metrics

# (response, correct, reflects): N = 8, N+ = 5, N_ref = 3, N_ref+ = 2.
EIGHT = [
    ("Wait, the shape is a circle.", True, True),
    ("Let me VERIFY: it is blue.", True, True),  # case-insensitive
    ("It is a triangle.", True, False),
    ("Yes.", True, False),  # "yes" is not "yet"
    ("Checked it, and again: no.", True, False),  # "check again" must be contiguous
    ("Rethink... the answer is red.", False, True),
    ("The colour is green.", False, False),
    ("It is a square, re check done.", False, False),  # "re check" is none of the words
]


def test_maye_reflection_words():
    assert len(REFLECTION_WORDS) == 15
    assert REFLECTION_WORDS == (
        "re-check", "re-evaluate", "re-examine", "re-think", "recheck", "reevaluate", "reexamine",
        "reevaluation", "rethink", "check again", "think again", "try again", "verify", "wait", "yet",
    )  # fmt: skip


def test_eight_hand_made_responses():
    responses, correct, reflects = map(list, zip(*EIGHT, strict=True))
    assert [has_reflection(text) for text in responses] == reflects
    metrics = reflection_metrics(responses, correct)
    assert metrics == ReflectionMetrics(
        n_responses=8,
        n_correct=5,
        n_reflection=3,
        n_reflection_correct=2,
        reflection_ratio=3 / 8,
        reflection_ratio_in_correct=2 / 5,
        reflection_ratio_in_incorrect=1 / 3,  # (3 - 2) / (8 - 5)
        correct_ratio_in_reflection=2 / 3,
        correct_ratio_in_no_reflection=3 / 5,  # (5 - 2) / (8 - 3)
    )


def test_no_correct_responses_leaves_the_in_correct_ratio_null():
    responses = [text for text, _, _ in EIGHT]
    metrics = reflection_metrics(responses, [False] * 8)
    assert metrics.reflection_ratio_in_correct is None  # N+ = 0
    assert metrics.reflection_ratio_in_incorrect == 3 / 8
    assert metrics.correct_ratio_in_reflection == 0.0  # a measured zero, not a missing value
    assert metrics.correct_ratio_in_no_reflection == 0.0


def test_all_correct_responses_leaves_the_in_incorrect_ratio_null():
    metrics = reflection_metrics([text for text, _, _ in EIGHT], [True] * 8)
    assert metrics.reflection_ratio_in_incorrect is None  # N - N+ = 0
    assert metrics.reflection_ratio_in_correct == 3 / 8
    assert metrics.correct_ratio_in_reflection == 1.0


def test_no_reflecting_responses_leaves_the_in_reflection_ratio_null():
    responses = [text for text, _, reflects in EIGHT if not reflects]
    correct = [right for _, right, reflects in EIGHT if not reflects]
    metrics = reflection_metrics(responses, correct)
    assert metrics.reflection_ratio == 0.0
    assert metrics.correct_ratio_in_reflection is None  # N_ref = 0
    assert metrics.reflection_ratio_in_correct == 0.0
    assert metrics.correct_ratio_in_no_reflection == 3 / 5


def test_all_reflecting_responses_leaves_the_no_reflection_ratio_null():
    metrics = reflection_ratios([True, True], [True, False])
    assert metrics.correct_ratio_in_no_reflection is None  # N - N_ref = 0
    assert metrics.correct_ratio_in_reflection == 0.5


def test_no_responses_gives_every_ratio_null():
    metrics = reflection_metrics([], [])
    assert (metrics.n_responses, metrics.n_correct, metrics.n_reflection) == (0, 0, 0)
    ratios = [
        metrics.reflection_ratio,
        metrics.reflection_ratio_in_correct,
        metrics.reflection_ratio_in_incorrect,
        metrics.correct_ratio_in_reflection,
        metrics.correct_ratio_in_no_reflection,
    ]
    assert ratios == [None] * 5


def test_words_match_as_substrings_like_maye():
    assert has_reflection("I was awaiting the answer")  # contains "wait"
    assert has_reflection("a YETI")  # contains "yet"
    assert not has_reflection("Yesterday it was red")
    assert has_reflection("RE-EVALUATE")
    assert has_reflection("hmm, red", words=["HMM"])
    assert not has_reflection("Wait", words=[])


def test_word_counts_are_total_occurrences():
    counts = reflection_word_counts(["Wait, wait. Verify!", "not yet, WAIT"])
    assert counts["wait"] == 3
    assert counts["verify"] == 1
    assert counts["yet"] == 1
    assert counts["rethink"] == 0
    assert list(counts) == list(REFLECTION_WORDS)


@given(st.lists(st.tuples(st.booleans(), st.booleans()), max_size=40))
def test_ratios_match_a_per_record_count(pairs):
    reflects = [r for r, _ in pairs]
    correct = [c for _, c in pairs]
    metrics = reflection_ratios(np.array(reflects, dtype=bool), correct)

    def share(rows, condition):
        rows = list(rows)
        return None if not rows else float(Fraction(sum(map(condition, rows)), len(rows)))

    assert metrics.reflection_ratio == share(pairs, lambda p: p[0])
    assert metrics.reflection_ratio_in_correct == share((p for p in pairs if p[1]), lambda p: p[0])
    assert metrics.reflection_ratio_in_incorrect == share((p for p in pairs if not p[1]), lambda p: p[0])
    assert metrics.correct_ratio_in_reflection == share((p for p in pairs if p[0]), lambda p: p[1])
    assert metrics.correct_ratio_in_no_reflection == share((p for p in pairs if not p[0]), lambda p: p[1])


def test_reflection_input_errors():
    with pytest.raises(ValueError, match="reflects has 2 values but correct has 1"):
        reflection_ratios([True, False], [True])
    with pytest.raises(ValueError, match=r"correct\[1\] = 0.5"):
        reflection_metrics(["a", "b"], [1, 0.5])
    with pytest.raises(ValueError, match="3 responses but 2 correctness values"):
        reflection_metrics(["a", "b", "c"], [1, 0])


def test_length_metrics_and_clip_ratio():
    metrics = length_metrics([12, 2048, 300, 2048, 0], max_length=2048)
    assert metrics.n_responses == 5
    assert metrics.mean_length == (12 + 2048 + 300 + 2048 + 0) / 5
    assert metrics.length_clip_ratio == 2 / 5
    assert length_metrics([5, 7], max_length=8).length_clip_ratio == 0.0
    empty = length_metrics([], max_length=8)
    assert (empty.mean_length, empty.length_clip_ratio) == (None, None)


def test_length_metrics_accept_a_cpu_tensor():
    torch = pytest.importorskip("torch")
    metrics = length_metrics(torch.tensor([4, 8, 8]), max_length=8)
    assert (metrics.mean_length, metrics.length_clip_ratio) == (20 / 3, 2 / 3)


def test_length_errors_name_the_response():
    with pytest.raises(ValueError, match=r"token_lengths\[1\] = 9 lies outside \[0, max_length=8\]"):
        length_metrics([3, 9], max_length=8)
    with pytest.raises(ValueError, match="max_length must be a positive integer"):
        length_metrics([3], max_length=0)
    with pytest.raises(TypeError, match="integer token counts"):
        length_metrics([3.5], max_length=8)


def test_response_metrics_combines_both_and_flattens():
    responses, correct, _ = map(list, zip(*EIGHT, strict=True))
    lengths = [10, 64, 20, 3, 64, 40, 9, 30]
    metrics = response_metrics(responses, lengths, correct, max_length=64)
    assert metrics.length.mean_length == sum(lengths) / 8
    assert metrics.length.length_clip_ratio == 2 / 8
    assert metrics.reflection == reflection_metrics(responses, correct)
    flat = metrics.as_dict()
    assert flat["n_responses"] == 8
    assert flat["max_length"] == 64
    assert flat["correct_ratio_in_reflection"] == 2 / 3
    assert len(flat) == 4 + 9 - 1  # n_responses appears once

    nulls = response_metrics(responses, lengths, [False] * 8, max_length=64).as_dict()
    assert "reflection_ratio_in_correct" in nulls and nulls["reflection_ratio_in_correct"] is None

    with pytest.raises(ValueError, match="8 responses but 7 token lengths"):
        response_metrics(responses, lengths[:7], correct, max_length=64)
