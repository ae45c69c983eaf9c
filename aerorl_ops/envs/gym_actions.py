"""A model's reply as a Gymnasium action: action words, or a regular expression and a word -> action table.

``ActionParser.of_words(["left", "right", "forward"])`` maps the k-th word to discrete action k; the
reply's action is its earliest whole-word match of any of the words, in any case ("Forward." and
"I go forward" are action 2). ``ActionParser.of_regex(pattern, mapping)`` takes the first match of
``pattern`` (its first group when it has groups, else the whole match) and looks it up in ``mapping``
(case-insensitive). A reply with no match, or a match the table does not hold, is no action:
``parse`` returns None, and the environment counts a parse failure (``envs.gymnasium_env``).

>>> parser = ActionParser.of_words(["left", "right", "forward"])
>>> parser.parse("Forward."), parser.parse("turn right, then left"), parser.parse("backward")
(2, 1, None)
>>> go = ActionParser.of_regex(r"move:\\s*(\\w+)", {"up": 0, "down": 1})
>>> go.parse("move: DOWN"), go.parse("move: sideways"), go.parse("down")
(1, None, None)
>>> go.word(1), parser.words
('down', ('left', 'right', 'forward'))
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ActionParser:
    """``pattern`` finds the action text in a reply; ``actions`` maps that text (lower case) to an action."""

    pattern: re.Pattern[str]
    actions: Mapping[str, int]

    @classmethod
    def of_words(cls, words: Sequence[str]) -> ActionParser:
        """The k-th word is action k; a word is matched whole, in any case (longest first)."""
        if isinstance(words, str) or not words or not all(isinstance(word, str) and word.strip() for word in words):
            raise ValueError(f"actions must be a non-empty list of action words, got {words!r}")
        if len({word.strip().lower() for word in words}) != len(words):
            raise ValueError(f"actions lists a word twice (words are matched in any case): {list(words)}")
        actions = _table({word: index for index, word in enumerate(words)}, "actions")
        alternatives = "|".join(re.escape(word) for word in sorted(actions, key=len, reverse=True))
        return cls(re.compile(rf"(?<!\w)({alternatives})(?!\w)", re.IGNORECASE), actions)

    @classmethod
    def of_regex(cls, pattern: str, mapping: Mapping[str, int]) -> ActionParser:
        """``pattern``'s first match (its first group, if any) looked up in ``mapping`` (in any case)."""
        try:
            compiled = re.compile(pattern)
        except re.error as error:
            raise ValueError(f"action_regex {pattern!r} is not a regular expression: {error}") from None
        if not isinstance(mapping, Mapping) or not mapping:
            raise ValueError(f"action_map must be a table of action word -> action number, got {mapping!r}")
        return cls(compiled, _table(mapping, "action_map"))

    @property
    def words(self) -> tuple[str, ...]:
        """The action words, in action order (for the observation's ``{actions}``)."""
        return tuple(sorted(self.actions, key=lambda word: (self.actions[word], word)))

    def word(self, action: int) -> str:
        """The first word (``words`` order) of ``action``; a ``KeyError`` naming it when none is."""
        for word in self.words:
            if self.actions[word] == action:
                return word
        raise KeyError(f"no action word for action {action}; the words: {', '.join(self.words)}")

    def parse(self, reply: str) -> int | None:
        """The action ``reply`` names, or None when it names none (module docstring)."""
        match = self.pattern.search(reply)
        if match is None:
            return None
        text = match.group(1) if self.pattern.groups else match.group(0)
        return self.actions.get((text or "").strip().lower())

    def check_actions(self, count: int, env_id: str) -> None:
        """A ``ValueError`` naming ``env_id`` when an action number is not one of its ``count`` actions."""
        outside = sorted({action for action in self.actions.values() if not 0 <= action < count})
        if outside:
            raise ValueError(f"gymnasium env {env_id!r} has {count} discrete actions (0..{count - 1}); the action "
                             f"words name {outside}: list at most {count} actions, or map words to 0..{count - 1}")


def _table(mapping: Mapping[str, int], setting: str) -> dict[str, int]:
    table: dict[str, int] = {}
    for word, action in mapping.items():
        if not isinstance(word, str) or not word.strip() or isinstance(action, bool) or not isinstance(action, int):
            raise ValueError(f"{setting} must map action words to action numbers, got {word!r} -> {action!r}")
        key = word.strip().lower()
        if key in table and table[key] != action:
            raise ValueError(f"{setting} maps {word!r} to {action} and to {table[key]} (words are matched in any case)")
        table[key] = action
    return table
