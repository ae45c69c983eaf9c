"""The vectorised string helpers give exactly Python's answers, ASCII or not."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from aerorl_ops.rewards.columnar.alias_columns import entity_alias_pairs
from aerorl_ops.rewards.columnar.text_columns import contains_pairs, py_lower, py_strip, word_counts
from aerorl_ops.rewards.normalize import entity_aliases, word_count

ALPHABET = st.sampled_from(
    list("aZz09+-.,%' \t\n\x0b\x0c\r\x1c\x1f\x00!?;:/") + ["é", "İ", "Σ", "\u00a0", "\u2003", "😀"])
TEXTS = st.lists(st.text(alphabet=ALPHABET, max_size=12), max_size=40)
NUMBERS = st.from_regex(r"\+?[0-9]{1,20}(\.[0-9]{1,20})?%?", fullmatch=True)


def aliases_by_entity(values: list[str]) -> list[set[str]]:
    pairs = entity_alias_pairs(pa.array(values, pa.string()))
    found: list[set[str]] = [set() for _ in values]
    for entity, alias in zip(pairs.entity.tolist(), pairs.aliases.to_pylist(), strict=True):
        found[entity].add(alias)
    return found


@settings(max_examples=60, deadline=None)
@given(TEXTS)
def test_string_rules_match_python(values):
    array = pa.array(values, pa.string())
    assert py_strip(array).to_pylist() == [v.strip() for v in values]
    assert py_lower(array).to_pylist() == [v.lower() for v in values]
    assert word_counts(array).tolist() == [word_count(v) for v in values]


@settings(max_examples=60, deadline=None)
@given(TEXTS)
def test_entity_alias_pairs_match_entity_aliases(values):
    assert aliases_by_entity(values) == [set(entity_aliases(v)) for v in values]


@settings(max_examples=40, deadline=None)
@given(st.lists(NUMBERS, min_size=1, max_size=30))
def test_number_aliases_match_python_formatting(tokens):
    assert aliases_by_entity(tokens) == [set(entity_aliases(t)) for t in tokens]


def test_hand_checked_aliases():
    assert aliases_by_entity(["Within the next 2-3 weeks.", "12.50%", "", "...", "a1b2"]) == [
        {"within the next 2-3 weeks", "next 2-3 weeks"},
        {"12.50%", "12.5", "12.5%", "0.125"},
        set(),
        {""},
        {"a1b2", "a 1 b 2", "1 b 2", "1", "2"},
    ]


def test_contains_pairs_is_substring_by_code_point():
    found = contains_pairs(pa.array(["abc", "héllo", "x", ""]), pa.array(["bc", "él", "xy", "a"]))
    assert found.tolist() == [True, True, False, False]
