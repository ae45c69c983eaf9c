"""``mixture``: one environment drawn from several others by weight, each item keeping where it came from.

How a mixture of ``limit`` items over parts ``p_1 .. p_k`` with weights ``w_1 .. w_k`` is drawn, with ``seed``:

1. **Counts** (:func:`mixture_counts`, Hamilton's largest-remainder method): part i's quota is
   ``limit * w_i / sum(w)``, computed exactly (each weight read as the decimal it is written as); each
   part gets the whole part of its quota, and the items left over go one each to the parts with the
   largest remainders (a tie: the earlier part). The counts sum to ``limit``: 10 items at 0.7 / 0.3
   are 7 and 3, 10 at 1 / 1 / 1 are 4, 3 and 3.
2. **Parts**: each part's environment is built by its builder with its count as its ``limit`` and the
   mixture's ``seed`` (the part draws that many of its own records, as a run naming it with that limit
   and seed would); a part whose count is 0 is not built. A part that holds fewer items than its count
   (it rejected some records) leaves the mixture that much shorter; its rejections are the mixture's.
3. **Order** (:func:`interleave`): the list of part positions (part 1 as often as it holds items, then
   part 2, ...) shuffled by ``random.Random(seed)``; the n-th occurrence of part i takes part i's n-th
   item, so each part's items keep their own order.

Each item is the part's item with ``dataset`` = the part's name (its ``[datasets.<name>]`` table) and
``item_id`` = ``"<part>/<id in the part>"`` (unique across parts); everything else as the part gave it.
The mixture's own name is the environment's ``name`` (what a run's ``env`` or the benchmark's rows carry).
Each item is graded by its part's environment, on the item as its part gave it (a part's grader may read
its own dataset name or id), for as many turns as that part's episodes take (:class:`MixtureState`).

>>> mixture_counts(10, (0.7, 0.3)), mixture_counts(10, (1, 1, 1)), mixture_counts(5, (0.5, 0, 0.5))
((7, 3), (4, 3, 3), (3, 0, 2))
>>> interleave((7, 3), seed=0), interleave((7, 3), seed=1)
([1, 1, 0, 0, 0, 0, 0, 0, 1, 0], [0, 1, 1, 1, 0, 0, 0, 0, 0, 0])
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction

from aerorl_ops.config.mixtures import MIXTURE_KIND
from aerorl_ops.envs.base import HeldItems, TaskEnv
from aerorl_ops.envs.types import Completion, EpisodeState, Observation, StepResult
from aerorl_ops.envs.wrapped import WrappedEnv
from aerorl_ops.rows.load_result import RejectedRow
from aerorl_ops.rows.source_fingerprint import SourceFingerprint
from aerorl_ops.rows.task_item import TaskItem

PartEnv = Callable[[int, int], TaskEnv]
"""Builds one part's environment: called with its count (its ``limit``) and the mixture's ``seed``."""
ID_SEPARATOR = "/"
"""Between a part's name and its item's own id in a mixture item's id."""


def mixture_counts(limit: int, weights: Sequence[float]) -> tuple[int, ...]:
    """How many of ``limit`` items each part gets (module docstring, step 1); ``ValueError`` for weights that
    are negative, not finite or sum to 0."""
    if limit < 0:
        raise ValueError(f"a mixture's limit must be >= 0, got {limit}")
    if not all(math.isfinite(weight) for weight in weights):
        raise ValueError(f"mixture weights must be finite numbers, got {list(weights)}")
    exact = [Fraction(str(weight)) if isinstance(weight, float) else Fraction(weight) for weight in weights]
    if not exact or any(weight < 0 for weight in exact) or sum(exact) <= 0:
        raise ValueError(f"mixture weights must be numbers >= 0 summing to more than 0, got {list(weights)}")
    quotas = [limit * weight / sum(exact) for weight in exact]
    counts = [int(quota) for quota in quotas]  # floor: quotas are >= 0
    by_remainder = sorted(range(len(quotas)), key=lambda part: (-(quotas[part] - counts[part]), part))
    for part in by_remainder[:limit - sum(counts)]:
        counts[part] += 1
    return tuple(counts)


def interleave(counts: Sequence[int], seed: int) -> list[int]:
    """The part of each position of the mixture (module docstring, step 3): part i ``counts[i]`` times,
    shuffled by ``random.Random(seed)``."""
    order = [part for part, count in enumerate(counts) for _ in range(count)]
    random.Random(seed).shuffle(order)
    return order


def mixture_item(part: str, item: TaskItem) -> TaskItem:
    """``item`` of part ``part`` as a mixture item: of dataset ``part``, its id ``"<part>/<id>"``.

    >>> item = mixture_item("shapes", TaskItem("s0", "shapes_file", "test", "s.jsonl", "Colour?", ("red",), ()))
    >>> item.item_id, item.dataset, item.answers
    ('shapes/s0', 'shapes', ('red',))
    """
    return replace(item, item_id=f"{part}{ID_SEPARATOR}{item.item_id}", dataset=part)


@dataclass(frozen=True)
class MixtureState(EpisodeState):
    """A mixture episode: the mixture's ``item`` and ``turn``, the ``part`` it came from and that part's
    own episode state (``inner``, on the item as the part gave it)."""

    part: str = field(kw_only=True)
    inner: EpisodeState = field(kw_only=True)


class MixtureEnv(HeldItems):
    """The items of several environments (``parts``: name -> environment, in order), interleaved by
    ``seed`` (module docstring), each graded by its own part. ``sources``: every part of the mixture, in
    order, those drawn 0 times (not built) included; left out, the names of ``parts``."""

    def __init__(self, name: str, parts: Mapping[str, TaskEnv], seed: int, sources: Sequence[str] = ()) -> None:
        self.name = name
        self.parts = dict(parts)
        self.sources = tuple(sources) or tuple(self.parts)
        self.rejected: list[RejectedRow] = [row for env in self.parts.values() for row in env.rejected]
        names, envs = list(self.parts), list(self.parts.values())  # the parts built, not every source
        taken = [0] * len(envs)
        items, self._origin = [], {}
        for position in interleave([len(env) for env in envs], seed):
            source, original = names[position], envs[position].items[taken[position]]
            taken[position] += 1
            item = mixture_item(source, original)
            items.append(item)
            self._origin[item.item_id] = original
        self.items: tuple[TaskItem, ...] = tuple(items)

    def __repr__(self) -> str:
        return f"MixtureEnv({self.name!r}, items={len(self)}, parts={list(self.parts.values())!r})"

    @property
    def max_turns(self) -> int:
        return max((int(getattr(env, "max_turns", 1)) for env in self.parts.values()), default=1)

    def reset(self, item: TaskItem) -> tuple[MixtureState, Observation]:
        if item.item_id not in self._origin:
            raise KeyError(f"environment {self.name!r}: item {item.item_id!r} is none of this mixture's items")
        inner, observation = self.parts[item.dataset].reset(self._origin[item.item_id])
        return MixtureState(item, inner.turn, part=item.dataset, inner=inner), observation

    def step(self, state: EpisodeState, completion: Completion) -> StepResult:
        if not isinstance(state, MixtureState):  # a state the caller made of one of the mixture's items
            started = self.reset(state.item)[0]
            state = replace(started, turn=state.turn, inner=replace(started.inner, turn=state.turn))
        result = self.parts[state.part].step(state.inner, completion)
        if result.state is None:
            return result
        return result._replace(state=MixtureState(state.item, result.state.turn, part=state.part,
                                                  inner=result.state))


def mixture_env(parts: Mapping[str, PartEnv], weights: Sequence[float], split: str = "", limit: int | None = None,
                seed: int = 0, name: str = MIXTURE_KIND) -> MixtureEnv:
    """The ``mixture`` environment: ``limit`` items over ``parts`` (name -> builder, :data:`PartEnv`) by
    ``weights``, drawn with ``seed`` (module docstring). ``split`` is not used: each part reads its own."""
    if len(weights) != len(parts):
        raise ValueError(f"mixture {name!r}: {len(weights)} weights for {len(parts)} parts ({', '.join(parts)})")
    if limit is None:
        raise ValueError(f"mixture {name!r} needs a limit: how many items it draws from its parts by weight")
    counts = mixture_counts(limit, weights)
    built = {part: build(count, seed) for (part, build), count in zip(parts.items(), counts, strict=True) if count}
    return MixtureEnv(name, built, seed, sources=tuple(parts))


def mixture_sources(env: TaskEnv) -> tuple[str, ...]:
    """The part names of ``env`` when it is a mixture (also inside a wrapper: a judge, a second try), in
    order; () for any other environment (a run's single dataset)."""
    while isinstance(env, WrappedEnv):
        env = env.env
    return env.sources if isinstance(env, MixtureEnv) else ()


def mixture_fingerprint(name: str, settings: Mapping[str, object],
                        parts: Mapping[str, SourceFingerprint]) -> SourceFingerprint:
    """What a mixture's items are drawn from: its own ``settings`` (weights, limit, seed) and each part's
    fingerprint as drawn (``parts``: name -> fingerprint), files and packages together, each part's
    settings named ``<part>.<setting>``."""
    own = SourceFingerprint.generated(f"mixture {name} of {', '.join(parts)}", settings)
    files = tuple(sorted({file for part in parts.values() for file in part.files}, key=lambda file: file.path))
    packages = "; ".join(dict.fromkeys(part.package for part in parts.values() if part.package))
    named = [(f"{part}.{key}", value) for part, fingerprint in parts.items() for key, value in fingerprint.settings]
    return SourceFingerprint(own.location, files, packages, tuple(sorted([*own.settings, *named])))
