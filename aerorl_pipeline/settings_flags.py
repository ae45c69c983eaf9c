"""Command-line flags generated from the settings dataclasses (``aerorl_ops.config``).

One flag per setting (``max_new_tokens`` -> ``--max-new-tokens``), with the setting's type and
help, defaulting to the value in the ``--config`` file, so ``-h`` shows what a run will use and no
default is written here. Settings that are tables or lists (reward weights, batch sizes) have no
flag: they are set in the file. A flag's value is checked by the setting's own check, as the same
key in the file is (:func:`checked_flags`); an error names the flag. An input error, from a flag,
the file or a model folder, is printed as one line (:func:`input_error_types`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TypeVar

from aerorl_ops.config.fields import ConfigError, checked, setting_fields, setting_types

T = TypeVar("T")

FLAG_TYPES = {int: int, float: float, str: str, str | None: str, int | None: int, float | None: float}
"""Each scalar setting type, and the type its flag parses (an unset setting's flag defaults to None)."""


def flag_name(setting: str) -> str:
    return "--" + setting.replace("_", "-")


def add_setting_flags(parser: argparse.ArgumentParser, settings: object, *,
                      exclude: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Add a flag for each scalar setting of ``type(settings)`` (less ``exclude``), defaulting to
    the value in ``settings``; return the settings that got a flag."""
    types = setting_types(type(settings))
    added = []
    for field in setting_fields(type(settings)):
        kind = types[field.name]
        boolean = kind is bool or kind == bool | None  # --name / --no-name (neither: the default, maybe unset)
        if field.name in exclude or (not boolean and kind not in FLAG_TYPES):
            continue
        default = getattr(settings, field.name)
        text = f"{field.metadata['help']} (default: %(default)s)"
        if boolean:
            parser.add_argument(flag_name(field.name), action=argparse.BooleanOptionalAction, default=default,
                                help=text)
        else:
            parser.add_argument(flag_name(field.name), type=FLAG_TYPES[kind], default=default,
                                help=text)
        added.append(field.name)
    return tuple(added)


def flag_values(args: argparse.Namespace, names: tuple[str, ...]) -> dict[str, Any]:
    """The settings ``names`` as parsed (every one has a value: the flag's, else the file's)."""
    return {name: getattr(args, name) for name in names}


def checked_flags(settings_type: type[T], command: str, section: str, values: dict[str, Any]) -> T:
    """``settings_type`` from the settings ``values`` of a command line, each checked by its
    setting's own check; a ``ConfigError`` reads ``aerorl <command>: setting '--flag-name' ...``."""
    return checked(settings_type, f"aerorl {command}", section, values, named=flag_name)


def config_path_from(argv: list[str], default: Path) -> Path:
    """The ``--config`` of a command line, read before the full parser is built (its flags'
    defaults come from that file)."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--config", type=Path, default=default)
    known, _ = early.parse_known_args(argv)
    return known.config.expanduser().resolve()


def input_error_types() -> tuple[type[Exception], ...]:
    """The errors that are a user's input (a setting, a file, a model folder), raised anywhere, in a
    job's step too: a command prints them as one line and exits 2."""
    loading = sys.modules.get("aerorl_ops.models.loading")  # never imported: none of its errors was raised
    return (ConfigError,) + ((loading.ModelUnavailableError,) if loading else ())


def input_error_in(error: BaseException) -> BaseException | None:
    """The input error that caused ``error`` (itself, or one it was raised from), else None."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, input_error_types()):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None
