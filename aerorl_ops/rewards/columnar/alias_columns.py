"""``entity_aliases`` for a whole array of entity strings at once.

Calling ``entity_aliases`` once per string costs a few microseconds of interpreter time
each; for millions of distinct entities that dominates scoring. So ASCII entities are
handled together: joined with NUL separators into one string, normalised (lower case,
whitespace) in a few passes over it, tokenised by one ``findall`` of the token pattern
(the separators come back as tokens and mark where each entity ends), and the aliases
are assembled with Arrow (joins of the tokens, stopword filtering, trailing punctuation)
and one ``format`` per distinct number. Non-ASCII entities, and entities holding a NUL,
go through ``entity_aliases`` itself.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from aerorl_ops.rewards.columnar.columns import Encoded, encode_if_repeating
from aerorl_ops.rewards.columnar.text_columns import ascii_mask
from aerorl_ops.rewards.normalize import ENTITY_STOPWORDS, ENTITY_TOKEN, TRAILING_PUNCTUATION, entity_aliases


class AliasPairs(NamedTuple):
    """Every (entity, alias) pair of a set of entities: ``aliases[i]`` belongs to entity
    ``entity[i]``. A blank entity has no pair; every other entity has at least one."""

    entity: np.ndarray
    aliases: pa.Array


_SEPARATOR = "\x00"
_ENTITY_TOKEN_OR_SEPARATOR = re.compile(ENTITY_TOKEN.pattern + "|" + _SEPARATOR)
_ODD_WHITESPACE = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f"
_COLLAPSE_WHITESPACE = re.compile(r"[\t\n\x0b\x0c\r\x1c-\x1f][\t\n\x0b\x0c\r\x1c-\x1f ]*| [\t\n\x0b\x0c\r\x1c-\x1f ]+")
_SPACE_AT_SEPARATOR = re.compile(" ?\x00 ?")


def _normalized_joined(texts: list[str]) -> str:
    """``"\\0".join(normalize_whitespace(t.strip().lower()) for t in texts)`` for ASCII
    texts without NUL, in a few passes over one string instead of one call per text."""
    joined = _SEPARATOR.join(texts).lower()
    if any(char in joined for char in _ODD_WHITESPACE) or "  " in joined:
        joined = _COLLAPSE_WHITESPACE.sub(" ", joined)
    if " " + _SEPARATOR in joined or _SEPARATOR + " " in joined:
        joined = _SPACE_AT_SEPARATOR.sub(_SEPARATOR, joined)
    return joined.strip(" ")


def _ragged(values: pa.Array, owners: np.ndarray, count: int) -> pa.ListArray:
    """Group ``values`` (sorted by owner) into one list per owner ``0..count-1``."""
    offsets = np.concatenate([[0], np.cumsum(np.bincount(owners, minlength=count))]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), values)


def _general_format(values: np.ndarray) -> pa.Array:
    """``[format(v, "g") for v in values]`` (``format_number``), without a Python frame per value."""
    return pa.array(list(map("{:g}".format, values.tolist())), pa.string())


def _number_aliases(numbers: Encoded, owner: np.ndarray) -> tuple[np.ndarray, pa.Array]:
    """(owner, alias) pairs of ``numeric_aliases`` for tokens that are plain unsigned
    numbers or percents (``numbers``: the tokens encoded; ``owner``: each token's entity)."""
    is_percent = pc.ends_with(numbers.values, "%").to_numpy(zero_copy_only=False)
    values = pc.cast(pc.utf8_rtrim(numbers.values, characters="%"), pa.float64()).to_numpy(zero_copy_only=False)
    plain = _general_format(values)
    percent_codes = np.flatnonzero(is_percent)
    with_sign = pc.binary_join_element_wise(plain.take(pa.array(percent_codes)), "%", "")
    fraction = _general_format(values[percent_codes] / 100.0)

    percent_occurrences = np.flatnonzero(is_percent[numbers.codes])
    slot = np.searchsorted(percent_codes, numbers.codes[percent_occurrences])
    owners = np.concatenate([owner, owner[percent_occurrences], owner[percent_occurrences]])
    aliases = pa.concat_arrays(
        [plain.take(pa.array(numbers.codes)), with_sign.take(pa.array(slot)), fraction.take(pa.array(slot))]
    )
    return owners, aliases


def _ascii_alias_pairs(texts: list[str]) -> AliasPairs:
    """``entity_aliases`` of ASCII texts holding no NUL, all at once (see the module doc)."""
    count = len(texts)
    joined = _normalized_joined(texts)
    normalized = pa.array(joined.split(_SEPARATOR) if count else [], pa.string())
    pieces = pa.array(_ENTITY_TOKEN_OR_SEPARATOR.findall(joined), pa.string())
    is_separator = pc.equal(pieces, _SEPARATOR).to_numpy(zero_copy_only=False)
    owner_of_piece = np.cumsum(is_separator) - is_separator
    tokens = pieces.filter(pa.array(~is_separator))
    token_owner = owner_of_piece[~is_separator]
    token_count = np.bincount(token_owner, minlength=count)

    token_text = pc.binary_join(_ragged(tokens, token_owner, count), " ")
    is_core = pc.invert(pc.is_in(tokens, value_set=pa.array(sorted(ENTITY_STOPWORDS)))).to_numpy(zero_copy_only=False)
    core_text = pc.binary_join(_ragged(tokens.filter(pa.array(is_core)), token_owner[is_core], count), " ")
    stripped = pc.utf8_rtrim(normalized, characters=TRAILING_PUNCTUATION)

    is_word = pc.ascii_is_alpha(pc.utf8_slice_codeunits(tokens, 0, 1)).to_numpy(zero_copy_only=False)
    has_dash = pc.match_substring(tokens, "-").to_numpy(zero_copy_only=False)
    is_number = ~is_word & ~has_dash
    numbers = encode_if_repeating(tokens.filter(pa.array(is_number)))
    number_owner, number_text = _number_aliases(numbers, token_owner[is_number])

    non_blank = pc.not_equal(normalized, "").to_numpy(zero_copy_only=False)
    has_tokens = token_count > 0
    keep_stripped = non_blank & (~has_tokens | pc.not_equal(stripped, "").to_numpy(zero_copy_only=False))
    keep_core = np.bincount(token_owner[is_core], minlength=count) > 0
    entity = np.concatenate(
        [np.flatnonzero(keep_stripped), np.flatnonzero(has_tokens), np.flatnonzero(keep_core), number_owner]
    )
    aliases = pa.concat_arrays(
        [
            stripped.filter(pa.array(keep_stripped)),
            token_text.filter(pa.array(has_tokens)),
            core_text.filter(pa.array(keep_core)),
            number_text,
        ]
    )
    return AliasPairs(entity.astype(np.int64), aliases)


def entity_alias_pairs(values: pa.Array) -> AliasPairs:
    """The pairs of ``(i, alias)`` for ``alias in entity_aliases(values[i])``."""
    texts = values.to_pylist()
    vectorised = ascii_mask(values) & ~pc.match_substring(values, _SEPARATOR).to_numpy(zero_copy_only=False)
    fast_index = np.flatnonzero(vectorised)
    fast = _ascii_alias_pairs([texts[i] for i in fast_index.tolist()])
    slow_index = np.flatnonzero(~vectorised)
    slow_aliases = [sorted(entity_aliases(texts[i])) for i in slow_index.tolist()]
    slow_owner = np.repeat(slow_index, [len(aliases) for aliases in slow_aliases]).astype(np.int64)
    return AliasPairs(
        np.concatenate([fast_index[fast.entity], slow_owner]),
        pa.concat_arrays([fast.aliases, pa.array([a for aliases in slow_aliases for a in aliases], pa.string())]),
    )
