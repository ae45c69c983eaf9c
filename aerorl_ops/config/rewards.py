"""Reward settings (the ``[rewards]`` table) and the reward component names, declared once.

``REWARD_COMPONENT_NAMES`` is the one list of the built-in components: ``rewards.registry`` maps
each name to its class (and checks that they agree), and every score column, weight and summary
field named after a component derives from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aerorl_ops.config.fields import (
    boolean,
    fail,
    number,
    parse_section,
    positive_int,
    regex_or_none,
    setting,
)
from aerorl_ops.config.judge import JudgeSettings, parse_judge

VERIFIER = "verifier"
GROUNDING = "grounding"
FORMAT = "format"
COST = "cost"
REWARD_COMPONENT_NAMES: tuple[str, ...] = (VERIFIER, GROUNDING, FORMAT, COST)


def reward_weights(where: str, setting_name: str, value: object) -> dict[str, float]:
    """A table of ``component = number``; every name must be in ``REWARD_COMPONENT_NAMES``."""
    if not isinstance(value, Mapping):
        raise fail(where, setting_name, "must be a table of name = number")
    for name in value:
        if name not in REWARD_COMPONENT_NAMES:
            raise fail(where, f"{setting_name}.{name}",
                       f"names no reward component; known: {', '.join(sorted(REWARD_COMPONENT_NAMES))}")
    return {name: number(where, f"{setting_name}.{name}", weight) for name, weight in value.items()}


@dataclass(frozen=True)
class RewardSettings:
    """How the benchmark and the training run score an answer.

    A component missing from ``weights`` keeps AeroRL's weight for it (see ``aerorl_compat``).
    ``judge`` is the ``[rewards.judge]`` table (``config.judge``): None, the default, means no judge.
    """

    weights: dict[str, float] = setting(
        default_factory=lambda: {VERIFIER: 0.4, GROUNDING: 0.3, FORMAT: 0.2, COST: 0.1},
        help="weight of each reward component in the total", check=reward_weights)
    require_json: bool = setting(True, help="the format reward requires a JSON answer", check=boolean)
    regex_pattern: str | None = setting(None, help="the format reward requires re.search to match this",
                                        check=regex_or_none)
    target_tokens: int = setting(24, help="word budget of the cost reward", check=positive_int)
    latency_budget_ms: float = setting(2000.0, help="latency budget of the cost reward (ms)", check=number)
    pass_threshold: float = setting(0.3, help="total reward counted as a pass", check=number)
    judge: JudgeSettings | None = None


def parse_rewards(where: str, table: object) -> RewardSettings:
    """The ``[rewards]`` table (or run config shaped like it), every value checked; its ``judge``
    sub-table, when present, as ``JudgeSettings`` (whose model key the whole file checks)."""
    if not isinstance(table, Mapping) or "judge" not in table:
        return parse_section(RewardSettings, where, "rewards", table)
    rest = {name: value for name, value in table.items() if name != "judge"}
    return parse_section(RewardSettings, where, "rewards", rest,
                         judge=parse_judge(where, "rewards.judge", table["judge"]))
