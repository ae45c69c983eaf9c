"""Text rules shared by the reward components, kept identical to AeroRL's.

Every function here is the single definition of one rule; the per-record components
and the columnar scorer both call them (the columnar scorer caches them per distinct
string), so the two paths cannot drift apart.
"""

from __future__ import annotations

import re
from typing import Any

ENTITY_STOPWORDS = frozenset(
    {"a", "an", "the", "within", "about", "around", "approximately", "roughly", "nearly", "just", "only"}
)
TRAILING_PUNCTUATION = ".,;:!?"

_WHITESPACE_RUN = re.compile(r"\s+")
ENTITY_TOKEN = re.compile(r"[-+]?\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)*%?|[a-z]+(?:[-'][a-z]+)*")
"""An entity token: a number, range or percent ("2-3", "42%"), or a word ("mr", "o'neil")."""
_NUMERIC_TOKEN = re.compile(r"([-+]?\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)*)%?")


def clip_score(value: float, lo: float = -1.0, hi: float = 1.0) -> float:
    """Clamp ``value`` into ``[lo, hi]`` (a NaN comes out as ``hi``, as in AeroRL).

    >>> clip_score(1.7), clip_score(-3.0), clip_score(0.25)
    (1.0, -1.0, 0.25)
    """
    return max(lo, min(hi, value))


def word_count(text: str) -> int:
    """Whitespace-separated words, the cost reward's token proxy.

    >>> word_count("  two words "), word_count("   ")
    (2, 0)
    """
    if not text.strip():
        return 0
    return len(text.split())


def normalize_whitespace(text: str) -> str:
    """Collapse every whitespace run to one space and strip the ends.

    >>> normalize_whitespace(" a \\t b\\n")
    'a b'
    """
    return _WHITESPACE_RUN.sub(" ", text).strip()


def entity_tokens(text: str) -> list[str]:
    """Lower-cased number/percent/range tokens and word tokens of ``text``.

    >>> entity_tokens("Next 2-3 weeks, 42%!")
    ['next', '2-3', 'weeks', '42%']
    """
    return ENTITY_TOKEN.findall(text.lower())


def format_number(value: float) -> str:
    """Python's general format (6 significant digits), AeroRL's canonical number form.

    >>> format_number(42.0), format_number(0.425), format_number(1234567.0)
    ('42', '0.425', '1.23457e+06')
    """
    return format(value, "g")


def numeric_aliases(token: str) -> set[str]:
    """Canonical spellings of a numeric token; a percent also reads as a fraction.

    Signed-negative numbers and ranges ("2-3") get no numeric alias, as in AeroRL.

    >>> sorted(numeric_aliases("42%")), sorted(numeric_aliases("007")), numeric_aliases("2-3")
    (['0.42', '42', '42%'], ['7'], set())
    """
    match = _NUMERIC_TOKEN.fullmatch(token)
    if match is None or "-" in match.group(1):
        return set()
    value = float(match.group(1))
    aliases = {format_number(value)}
    if token.endswith("%"):
        aliases.add(f"{format_number(value)}%")
        aliases.add(format_number(value / 100.0))
    return aliases


def entity_aliases(value: Any) -> frozenset[str]:
    """Every surface form under which an entity counts as the same entity.

    Lower-cased, whitespace collapsed; the text without trailing punctuation, its
    tokens, its tokens without stopwords, and numeric/percent forms. Blank input gives
    the empty set. A text with no tokens keeps its one stripped form even when that
    is the empty string (AeroRL's rule: "..." and "!!" name the same entity).

    >>> sorted(entity_aliases("Within the next 2-3 weeks."))
    ['next 2-3 weeks', 'within the next 2-3 weeks']
    >>> sorted(entity_aliases("42%"))
    ['0.42', '42', '42%']
    """
    text = normalize_whitespace(str(value).strip().lower())
    if not text:
        return frozenset()
    aliases = {text.rstrip(TRAILING_PUNCTUATION)}
    tokens = entity_tokens(text)
    if not tokens:
        return frozenset(aliases)
    aliases.add(" ".join(tokens))
    core_tokens = [token for token in tokens if token not in ENTITY_STOPWORDS]
    if core_tokens:
        aliases.add(" ".join(core_tokens))
    for token in tokens:
        aliases.update(numeric_aliases(token))
    return frozenset(alias for alias in aliases if alias)


def reference_candidates(reference: Any) -> list[str]:
    """The stripped, non-empty reference strings a response is checked against.

    >>> reference_candidates([" Paris ", "", "paris, france"]), reference_candidates(None)
    (['Paris', 'paris, france'], [])
    """
    if reference is None:
        return []
    if isinstance(reference, (list, tuple, set)):
        return [str(item).strip() for item in reference if str(item).strip()]
    text = str(reference).strip()
    return [text] if text else []
