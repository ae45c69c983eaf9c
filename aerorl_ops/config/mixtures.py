"""``kind = "mixture"`` tables: a dataset drawn from other ``[datasets.<name>]`` tables by weight.

::

    [datasets.mix]
    kind = "mixture"
    parts = ["easy_vqa", "shapes"]   # other [datasets.<name>] tables of the same file
    weights = [0.7, 0.3]             # one per part: its share of the mixture's limit
    limit = 100
    seed = 0

``parts`` name other tables of the file, each once, none of them a mixture (nor the mixture itself);
``weights`` hold one number per part, each at least 0 and summing to more than 0 (a part of weight 0
is left out). How a mixture of ``limit`` items is drawn is ``envs.mixture``'s (exact counts by
largest remainder, then a seeded interleave). Every error is one line naming the setting.

>>> mixture_parts("bench.toml", "mix", {"parts": ("a", "b"), "weights": (0.7, 0.3)}, {"a": "jsonl", "b": "easy_vqa"})
('a', 'b')
>>> mixture_parts("bench.toml", "mix", {"parts": ("a", "b"), "weights": (0, 0)}, {"a": "jsonl", "b": "easy_vqa"})
Traceback (most recent call last):
...
aerorl_ops.config.fields.ConfigError: bench.toml: setting 'datasets.mix.weights' must sum to more than 0, got [0, 0]
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from aerorl_ops.config.fields import fail

MIXTURE_KIND = "mixture"
"""The ``kind`` of a mixture table (its environment: ``envs.mixture.mixture_env``)."""


def _shown(value: object) -> str:
    """``value`` as the file wrote it (a list, not the tuple a table's list is read as)."""
    return repr(list(value)) if isinstance(value, tuple) else repr(value)


def _part_names(where: str, section: str, value: object) -> tuple[str, ...]:
    setting = f"{section}.parts"
    if value is None:
        raise fail(where, setting, "is required for kind 'mixture': the [datasets.<name>] tables it draws from")
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value \
            or not all(isinstance(name, str) and name for name in value):
        raise fail(where, setting, f"must be a non-empty list of [datasets.<name>] names, got {_shown(value)}")
    repeated = sorted({name for name in value if list(value).count(name) > 1})
    if repeated:
        raise fail(where, setting, f"names {', '.join(repeated)} more than once; name each part once")
    return tuple(value)


def mixture_weights(where: str, section: str, value: object, parts: tuple[str, ...]) -> tuple[float, ...]:
    """``weights``: one finite number >= 0 per part, summing to more than 0."""
    setting = f"{section}.weights"
    if value is None:
        raise fail(where, setting, f"is required for kind 'mixture': one weight per part ({', '.join(parts)})")
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(
            isinstance(weight, (int, float)) and not isinstance(weight, bool) for weight in value):
        raise fail(where, setting, f"must be a list of numbers, one per part, got {_shown(value)}")
    if len(value) != len(parts):
        raise fail(where, setting, f"must hold one weight per part ({len(parts)} part{'s' * (len(parts) > 1)}: "
                   f"{', '.join(parts)}), got {len(value)}")
    if any(not math.isfinite(weight) or weight < 0 for weight in value):
        raise fail(where, setting, f"must be finite numbers >= 0, got {list(value)}")
    if sum(value) <= 0:
        raise fail(where, setting, f"must sum to more than 0, got {list(value)}")
    return tuple(float(weight) for weight in value)


def mixture_parts(where: str, name: str, settings: Mapping[str, object], kinds: Mapping[str, str]) -> tuple[str, ...]:
    """The part names of mixture table ``name`` (``settings``: its kind's settings), checked against ``kinds``
    (every table of the file: name -> kind), its weights checked with them; ``ConfigError`` naming the
    setting otherwise."""
    section = f"datasets.{name}"
    parts = _part_names(where, section, settings.get("parts"))
    mixture_weights(where, section, settings.get("weights"), parts)
    for part in parts:
        if part == name:
            raise fail(where, f"{section}.parts", f"names the mixture itself ({part!r}); name other tables")
        if part not in kinds:
            others = ", ".join(other for other in kinds if other != name) or "none"
            raise fail(where, f"{section}.parts", f"names {part!r}, which is not a [datasets.<name>] table of this "
                       f"file; its tables: {others}")
        if kinds[part] == MIXTURE_KIND:
            raise fail(where, f"{section}.parts", f"names {part!r}, itself a mixture; a mixture's parts are "
                       "plain datasets (list that mixture's parts here instead)")
    return parts
