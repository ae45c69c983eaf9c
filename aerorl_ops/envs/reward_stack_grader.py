"""Grade a reply with AeroRL's weighted reward stack, and call it correct by the dataset's standard metric.

The reward is the stack's total (verifier, grounding, format, cost); the components it
reports are the stack's, plus the dataset's metric (``anls`` for DocVQA, ``relaxed_accuracy``
for ChartQA, from ``aerorl_ops.rewards.dataset_metrics``). ``correct`` is that metric at or
above the benchmark's threshold (``aerorl_ops.metrics``: ANLS >= 0.5, relaxed accuracy 1.0),
so accuracy here means what it means in the benchmark report. Latency is no training
signal: it is 0 ms; the generated-token count is the completion's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aerorl_ops.envs.types import Completion, StepInfo
from aerorl_ops.metrics import ANLS_CORRECT, RELAXED_ACCURACY_CORRECT
from aerorl_ops.rewards.context import RewardContext
from aerorl_ops.rewards.dataset_metrics import dataset_metric
from aerorl_ops.rewards.stack import WeightedRewardStack
from aerorl_ops.rewards.verifiers import prediction_text
from aerorl_ops.rows.task_item import TaskItem, prompt_text
from aerorl_ops.text.answers import extract_answer

CORRECT_AT: Mapping[str, float] = {"anls": ANLS_CORRECT, "relaxed_accuracy": RELAXED_ACCURACY_CORRECT}


def reward_context(item: TaskItem, completion: Completion) -> RewardContext:
    """The reward stack's view of one reply: the JSON ``answer`` it gives is its claimed entity."""
    answer = extract_answer(completion.text)
    return RewardContext(
        prompt=prompt_text(item),
        response=completion.text,
        reference=list(item.answers),
        metadata={"evidence_entities": list(item.evidence_entities), "claimed_entities": [answer] if answer else [],
                  "latency_ms": 0.0, "generated_tokens": len(completion.token_ids), "dataset": item.dataset},
    )


@dataclass(frozen=True)
class RewardStackGrader:
    """Reward = the stack's total; ``correct`` = the dataset's metric passes (False when it has none)."""

    stack: WeightedRewardStack

    def __call__(self, item: TaskItem, completion: Completion) -> tuple[float, StepInfo]:
        context = reward_context(item, completion)
        scored = self.stack.evaluate(context)
        components = dict(scored["components"])
        metric = dataset_metric(context)
        correct = False
        if metric is not None:
            components[metric.name] = metric.value
            correct = metric.value >= CORRECT_AT[metric.name]
        info = StepInfo(components=components, correct=correct, prediction=prediction_text(completion.text))
        return float(scored["total_reward"]), info
