"""The columnar scorer: ``evaluate_table`` gives ``evaluate_records``'s summary, fast.

Built-in components score whole columns (``COLUMN_KERNELS``); any other component (a
user's callable, a metric verifier) is scored record by record on contexts rebuilt
from the table, and only that component falls back. Such a context carries the replay
columns only: its metadata holds the entities, ``latency_ms`` and, when present,
``dataset`` and ``raw_response`` (other metadata keys of the file are not read), and a
reference list's items are the ``str()`` of the JSON items. Totals are rounded exactly
as Python's ``round(total, 6)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from aerorl_ops.aerorl_compat import AERORL_REWARDS, AERORL_TOP_K
from aerorl_ops.rewards.columnar.columns import ReplayColumns
from aerorl_ops.rewards.columnar.kernels import COLUMN_KERNELS
from aerorl_ops.rewards.context import RewardCallable
from aerorl_ops.rewards.stack import WeightedRewardStack, build_default_reward_stack, component_name, run_component
from aerorl_ops.rewards.summary import build_summary, empty_summary


def round6(values: np.ndarray) -> np.ndarray:
    """``[round(v, 6) for v in values]``: NumPy's rounding, with Python's exact rounding
    redone wherever a value lies within float error of a rounding tie.

    >>> round6(np.array([0.1234565, 2.5e-7, -0.0000015, 0.7])).tolist() == [
    ...     round(v, 6) for v in [0.1234565, 2.5e-7, -0.0000015, 0.7]]
    True
    """
    rounded = np.round(values, 6)
    scaled = values * 1e6
    with np.errstate(invalid="ignore"):
        distance_to_tie = np.abs(scaled - np.floor(scaled) - 0.5)
        risky = np.flatnonzero(~(distance_to_tie > 1e-6 + np.abs(scaled) * 1e-12))
    if len(risky):
        rounded[risky] = [round(value, 6) for value in values[risky].tolist()]
    return rounded


def score_by_record(reward_fn: RewardCallable, columns: ReplayColumns) -> tuple[str, np.ndarray]:
    """Score one component record by record; its name comes from its results."""
    names: set[str] = set()
    scores = []
    for context in columns.contexts():
        result = run_component(reward_fn, context)
        names.add(result.name)
        scores.append(result.score)
    if len(names) > 1:
        raise ValueError(f"component {component_name(reward_fn)!r} reported several names {sorted(names)}")
    name = names.pop() if names else component_name(reward_fn)
    return name, np.asarray(scores, dtype=np.float64)


def score_component(reward_fn: RewardCallable, columns: ReplayColumns) -> tuple[str, np.ndarray]:
    """(name, one score per row) for one component, by columns when it has a kernel."""
    kernel = COLUMN_KERNELS.get(type(reward_fn))
    if kernel is None:
        return score_by_record(reward_fn, columns)
    return reward_fn.name, kernel(reward_fn, columns)


def evaluate_table(
    table: pa.Table,
    reward_stack: WeightedRewardStack | None = None,
    *,
    pass_threshold: float = AERORL_REWARDS.pass_threshold,
    top_k: int = AERORL_TOP_K,
) -> dict[str, Any]:
    """``evaluate_records`` over a replay table (``read_replay``), with identical numbers.

    ``results`` is a table: ``id``, ``total`` and one score column per component (ids
    are strings: a non-string JSON id is its ``str()``). See the module doc for
    components that are not built in.
    """
    stack = reward_stack or build_default_reward_stack()
    if table.num_rows == 0:
        return empty_summary(stack.weights, pass_threshold)
    columns = ReplayColumns(table)
    scores: dict[str, np.ndarray] = {}
    total = np.zeros(table.num_rows)
    for reward_fn in stack.reward_functions:
        name, values = score_component(reward_fn, columns)
        scores[name] = values
        total = total + stack.weight_of(name) * values
    totals = round6(total)
    ids = table.column("id")
    results = pa.table({"id": ids, "total": totals, **scores})
    return build_summary(
        totals=totals,
        component_columns=scores,
        id_at=lambda index: ids[index].as_py(),
        components_at=lambda index: {name: float(values[index]) for name, values in scores.items()},
        weights=stack.weights,
        pass_threshold=pass_threshold,
        top_k=top_k,
        results=results,
    )
