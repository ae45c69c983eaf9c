"""The per-record scorer: AeroRL's ``evaluate_records``, the reference for every other path."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aerorl_ops.aerorl_compat import AERORL_REWARDS, AERORL_TOP_K
from aerorl_ops.rewards.context import RewardContext
from aerorl_ops.rewards.stack import WeightedRewardStack, build_default_reward_stack
from aerorl_ops.rewards.summary import build_summary, empty_summary


def context_from_record(record: dict[str, Any]) -> RewardContext:
    """A replay record as the context the components read (AeroRL's field mapping).

    >>> context_from_record({"response": "x", "reference": ["a"]}).reference
    ['a']
    """
    return RewardContext(
        prompt=str(record.get("prompt", "")),
        response=str(record.get("response", "")),
        reference=record.get("reference"),
        metadata=dict(record.get("metadata", {})),
    )


def evaluate_records(
    records: Iterable[dict[str, Any]],
    reward_stack: WeightedRewardStack | None = None,
    *,
    pass_threshold: float = AERORL_REWARDS.pass_threshold,
    top_k: int = AERORL_TOP_K,
) -> dict[str, Any]:
    """Score every record and summarise, exactly as AeroRL's ``evaluate_records``.

    Each result is ``{"id", "reward": {"total_reward", "components", "details"}}``.

    >>> summary = evaluate_records([{"id": "a", "response": "stop", "reference": "stop"}])
    >>> summary["count"], summary["average_reward"], summary["results"][0]["reward"]["components"]
    (1, 0.7, {'verifier': 1.0, 'grounding': 0.0, 'format': 1.0, 'cost': 1.0})
    """
    stack = reward_stack or build_default_reward_stack()
    outputs = [{"id": record.get("id"), "reward": stack.evaluate(context_from_record(record))} for record in records]
    if not outputs:
        return empty_summary(stack.weights, pass_threshold)
    names = list(outputs[0]["reward"]["components"])
    return build_summary(
        totals=[item["reward"]["total_reward"] for item in outputs],
        component_columns={name: [item["reward"]["components"][name] for item in outputs] for name in names},
        id_at=lambda index: outputs[index]["id"],
        components_at=lambda index: outputs[index]["reward"]["components"],
        weights=stack.weights,
        pass_threshold=pass_threshold,
        top_k=top_k,
        results=outputs,
    )
