"""Reading the claimed answer out of a ``{"answer": ...}`` response."""

from __future__ import annotations

import pytest

from aerorl_ops.generation.generations_table import claimed_entities
from aerorl_ops.text.answers import extract_answer


@pytest.mark.parametrize(("response", "expected"), [
    ('{"answer": "12%"}', "12%"),
    ('  {"answer": "May 4, 2023"}\n', "May 4, 2023"),
    ('{"answer": 42}', "42"),  # a bare JSON number still is the claim
    ('{"answer": "May 4"} and more', "May 4"),  # trailing junk: first answer field
    ('Sure! {"answer" : "Bob Smith", "note": "x"', "Bob Smith"),  # truncated JSON
    ('{"answer": "say \\"hi\\""}', 'say "hi"'),  # escaped quotes
    ('{"answer": "caf\\u00e9"} ok', "café"),  # escapes decoded in the fallback too
    ('{"answer": ""}', ""),
    ('{"answer": null}', None),
    ('{"result": "12"}', None),
    ('["answer", "12"]', None),
    ("no json at all", None),
    ("", None),
])
def test_extract_answer(response, expected):
    assert extract_answer(response) == expected


def test_claimed_entities_are_the_non_empty_answer():
    assert claimed_entities('{"answer": "12%"}') == ["12%"]
    assert claimed_entities('{"answer": ""}') == []
    assert claimed_entities("12%") == []
