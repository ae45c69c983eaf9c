"""Score one partition's generations: the reward stack, the standard metrics and the manual baseline."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pyarrow as pa

from aerorl_ops.config.benchmark import RewardSettings
from aerorl_ops.generation.records import replay_records
from aerorl_ops.metrics import anls, relaxed_accuracy
from aerorl_ops.rewards.evaluate import evaluate_records
from aerorl_ops.rewards.stack import WeightedRewardStack, build_reward_stack
from aerorl_ops.rewards.verifiers import prediction_text

COMPONENTS = ("verifier", "grounding", "format", "cost")

SCORE_SCHEMA = pa.schema([
    ("sample_id", pa.string()),
    ("dataset", pa.string()),
    *[(name, pa.float64()) for name in COMPONENTS],
    ("total_reward", pa.float64()),
    ("passed", pa.bool_()),
    ("manual_pass", pa.bool_()),
    ("anls", pa.float64()),
    ("relaxed_accuracy", pa.float64()),
    ("reward_config", pa.string()),
])


def reward_stack_for(settings: RewardSettings) -> WeightedRewardStack:
    return build_reward_stack(weights=settings.weights, require_json=settings.require_json,
                              regex_pattern=settings.regex_pattern, target_tokens=settings.target_tokens,
                              latency_budget_ms=settings.latency_budget_ms)


def manual_pass(response: str, references: Sequence[str]) -> bool:
    """AeroRL's manual baseline: any reference contained in the response, case-insensitive.

    >>> manual_pass('{"answer": "12"}', ["12%", "12"]), manual_pass("", ["12"])
    (True, False)
    """
    lowered = response.lower()
    return any(ref.strip() and ref.strip().lower() in lowered for ref in references)


def standard_metric(dataset: str, prediction: str, references: Sequence[str]) -> tuple[float | None, float | None]:
    """(ANLS, relaxed accuracy) for the row's dataset; the other is None."""
    if not references:
        return None, None
    if dataset == "docvqa":
        return anls(prediction, list(references)), None
    if dataset == "chartqa":
        return None, max(relaxed_accuracy(prediction, ref) for ref in references)
    return None, None


def score_generations(generations: pa.Table, settings: RewardSettings) -> pa.Table:
    """One ``SCORE_SCHEMA`` row per generation, in the same order."""
    records = replay_records(generations)
    summary = evaluate_records(records, reward_stack=reward_stack_for(settings),
                               pass_threshold=settings.pass_threshold)
    config_json = json.dumps({"weights": settings.weights, "require_json": settings.require_json,
                              "regex_pattern": settings.regex_pattern, "target_tokens": settings.target_tokens,
                              "latency_budget_ms": settings.latency_budget_ms,
                              "pass_threshold": settings.pass_threshold}, sort_keys=True)
    rows = []
    for record, result in zip(records, summary["results"], strict=True):
        references = record["reference"] or []
        prediction = prediction_text(record["response"])
        anls_score, relaxed = standard_metric(record["metadata"]["dataset"], prediction, references)
        components = result["reward"]["components"]
        total = result["reward"]["total_reward"]
        rows.append({
            "sample_id": record["id"],
            "dataset": record["metadata"]["dataset"],
            **{name: components.get(name) for name in COMPONENTS},
            "total_reward": total,
            "passed": total >= settings.pass_threshold,
            "manual_pass": manual_pass(record["response"], references),
            "anls": anls_score,
            "relaxed_accuracy": relaxed,
            "reward_config": config_json,
        })
    return pa.Table.from_pylist(rows, schema=SCORE_SCHEMA)
