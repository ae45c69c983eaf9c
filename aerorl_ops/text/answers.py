"""Read the claimed answer out of a model response."""

from __future__ import annotations

import json
import re

_ANSWER_FIELD = re.compile(r'"answer"\s*:\s*"((?:[^"\\]|\\.)*)"')


def extract_answer(response: str) -> str | None:
    """The ``answer`` of a ``{"answer": ...}`` response, or None when there is none.

    Strict JSON first; otherwise the first ``"answer": "..."`` field in the text, so a response
    with trailing junk still yields its claim (the format reward penalises the junk separately).

    >>> extract_answer('{"answer": "12%"}')
    '12%'
    >>> extract_answer('{"answer": "May 4"} and more') is None
    False
    >>> extract_answer("no json") is None
    True
    """
    text = response.strip()
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and "answer" in parsed and parsed["answer"] is not None:
        return str(parsed["answer"])
    match = _ANSWER_FIELD.search(text)
    if match is None:
        return None
    try:
        return json.loads(f'"{match.group(1)}"')
    except ValueError:
        return match.group(1)
