"""How a setting is declared: its default, its check and its help, once, on a dataclass field.

A settings dataclass marks each setting with :func:`setting`. The TOML parser reads the checks
(so every error names the file and the setting), and the Dagster run config and the command-line
flags are generated from the same fields (their types, defaults and help), so none of them
restates a default.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, field, fields
from typing import Any, TypeVar, get_type_hints

from aerorl_ops.error_line import printable_line, shortened

Check = Callable[[str, str, object], Any]
"""``check(where, setting, value)``: the value as stored, or ``ConfigError`` naming both."""

T = TypeVar("T")


class ConfigError(ValueError):
    """A setting in the benchmark config (or in run config / flags derived from it) is invalid."""


def fail(where: str, setting: str, problem: str) -> ConfigError:
    """The error of ``setting`` in ``where``: one printable line of at most a few thousand characters, whatever
    text of the file ``problem`` quotes."""
    return ConfigError(f"{where}: setting {shortened(repr(setting))} {shortened(printable_line(problem))}")


def setting(default: Any = MISSING, *, help: str, check: Check,
            default_factory: Callable[[], Any] | Any = MISSING) -> Any:
    """A dataclass field that is a user-facing setting: a file key, a run-config field, a flag."""
    return field(default=default, default_factory=default_factory, metadata={"help": help, "check": check})


def setting_fields(cls: type) -> tuple[Field, ...]:
    """The fields of ``cls`` declared with :func:`setting`, in declaration order."""
    return tuple(f for f in fields(cls) if "check" in f.metadata)


def setting_types(cls: type) -> dict[str, Any]:
    """Each setting's annotated type (``int``, ``float``, ``bool``, ``str``, ``str | None``, ...)."""
    hints = get_type_hints(cls)
    return {f.name: hints[f.name] for f in setting_fields(cls)}


def default_of(f: Field) -> Any:
    return f.default_factory() if f.default_factory is not MISSING else f.default


def help_of(cls: type, name: str) -> str:
    return next(f.metadata["help"] for f in setting_fields(cls) if f.name == name)


def parse_section(cls: type[T], where: str, section: str, table: object, *,
                  named: Callable[[str], str] | None = None, **fixed: Any) -> T:
    """``cls`` from a TOML table: unknown keys are refused, every value checked, the rest defaults.

    ``named`` says how an error names a setting (default ``section.name``, a command line's
    ``--flag-name``); ``fixed`` supplies fields that are not file settings of this section (e.g. a
    seed set elsewhere).
    """
    if not isinstance(table, Mapping):
        raise fail(where, section, "must be a table")
    known = {f.name: f for f in setting_fields(cls)}
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise fail(where, section, f"has unknown keys {unknown}; known keys: {', '.join(known)}")
    name_of = named or (lambda name: f"{section}.{name}")
    values = {name: known[name].metadata["check"](where, name_of(name), value) for name, value in table.items()}
    return cls(**fixed, **values)


def checked(cls: type[T], where: str, section: str, values: Mapping[str, Any], *,
            named: Callable[[str], str] | None = None, **fixed: Any) -> T:
    """``cls`` from a complete set of values (run config, flags), every one checked as in the file
    (``named``: how an error names a setting, as in :func:`parse_section`)."""
    return parse_section(cls, where, section, values, named=named, **fixed)


# --- checks ----------------------------------------------------------------------------------

def integer(where: str, setting: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(where, setting, f"must be an integer, got {value!r}")
    return value


def positive_int(where: str, setting: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise fail(where, setting, f"must be a positive integer, got {value!r}")
    return value


def non_negative_int(where: str, setting: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise fail(where, setting, f"must be an integer >= 0, got {value!r}")
    return value


def boolean(where: str, setting: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise fail(where, setting, f"must be true or false, got {value!r}")
    return value


def number(where: str, setting: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise fail(where, setting, f"must be a finite number, got {value!r}")
    return float(value)


def positive_number(where: str, setting: str, value: object) -> float:
    result = number(where, setting, value)
    if result <= 0:
        raise fail(where, setting, f"must be > 0, got {value!r}")
    return result


def non_negative_number(where: str, setting: str, value: object) -> float:
    result = number(where, setting, value)
    if result < 0:
        raise fail(where, setting, f"must be >= 0, got {value!r}")
    return result


def number_in(low: float, high: float, *, low_closed: bool, high_closed: bool) -> Check:
    """A check that the value is a finite number in the interval from ``low`` to ``high``, each end
    included when ``*_closed`` (the error writes the interval: ``[0, 1)``)."""
    interval = f"{'[' if low_closed else '('}{low:g}, {high:g}{']' if high_closed else ')'}"

    def check(where: str, setting: str, value: object) -> float:
        result = number(where, setting, value)
        above = result >= low if low_closed else result > low
        below = result <= high if high_closed else result < high
        if not (above and below):
            raise fail(where, setting, f"must be in {interval}, got {value!r}")
        return result
    return check


probability = number_in(0, 1, low_closed=False, high_closed=True)
"""A share in (0, 1], e.g. nucleus sampling's mass."""
open_fraction = number_in(0, 1, low_closed=False, high_closed=False)
fraction = number_in(0, 1, low_closed=True, high_closed=True)
fraction_below_one = number_in(0, 1, low_closed=True, high_closed=False)


def text(where: str, setting: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise fail(where, setting, f"must be a non-empty string, got {value!r}")
    return value


def text_or_empty(meaning: str) -> Check:
    """A check for a string that may be empty; ``meaning`` says what empty means in the error."""
    def check(where: str, setting: str, value: object) -> str:
        if not isinstance(value, str):
            raise fail(where, setting, f"must be a string ({meaning}), got {value!r}")
        return value
    return check


def one_of(*choices: object, described: str = "") -> Check:
    """A check that the value is one of ``choices`` (``described`` words them for the error)."""
    def check(where: str, setting: str, value: object) -> Any:
        if isinstance(value, bool) or value not in choices:
            raise fail(where, setting, f"must be {described or f'one of {choices}'}, got {value!r}")
        return value
    return check


def unset_or(check: Check) -> Check:
    """``check``, or None: the setting is unset and the code that reads it chooses (e.g. the RL
    algorithm's own default). TOML has no null, so a file leaves an unset setting out."""
    def check_unless_unset(where: str, setting: str, value: object) -> Any:
        return None if value is None else check(where, setting, value)
    return check_unless_unset


def regex_or_none(where: str, setting: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise fail(where, setting, f"must be a regular expression string, got {value!r}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)  # "possible nested set": its meaning is to change
            re.compile(value)
    except (re.error, OverflowError) as error:  # OverflowError: a repeat count past the engine's limit
        raise fail(where, setting, f"is not a valid regular expression ({error})") from error
    except RecursionError:
        raise fail(where, setting, "is not a usable regular expression (its groups nest too deeply)") from None
    except FutureWarning as warning:
        raise fail(where, setting, f"is a regular expression Python will read differently ({warning}); escape "
                   "the character it names with a backslash") from None
    return value
