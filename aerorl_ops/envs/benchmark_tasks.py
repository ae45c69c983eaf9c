"""``docvqa`` and ``chartqa``: the benchmark's rows as environments, graded by the benchmark's reward stack.

Items come from the same places as the ``docvqa_rows`` / ``chartqa_rows`` assets: the
embedded synthetic generator (no ``files``; ``limit`` items generated with ``seed``), or
Hugging Face dataset files on disk (``files``; the hub loaders of ``aerorl_ops.rows``, which
take the first ``limit`` records in file order, so ``seed`` is unused there). Records the
loaders reject are the environment's rejections. ChartQA files in lmms-lab's layout give
each item its ``type`` (``human_test`` / ``augmented_test``) as question type; other rows
have none. A dataset with no usable row is a ``NoUsableRowsError`` naming its files.

The prompt is the benchmark's: the image, the question, then its instruction asking for strict
JSON ``{"answer": ...}`` (``generation.prompts.ANSWER_INSTRUCTION``). So the default reward stack
requires JSON, with the stack's other settings at their defaults; pass ``reward_stack`` to score
otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from aerorl_ops.envs.base import SingleTurnEnv
from aerorl_ops.envs.messages import user_message, with_instruction
from aerorl_ops.envs.rejections import require_items
from aerorl_ops.envs.reward_stack_grader import RewardStackGrader
from aerorl_ops.generation.prompts import ANSWER_INSTRUCTION
from aerorl_ops.rewards.stack import WeightedRewardStack, build_reward_stack
from aerorl_ops.rows.hf_loaders import loader_for
from aerorl_ops.rows.load_result import LoadResult
from aerorl_ops.rows.synthetic_charts import synthetic_chartqa_rows
from aerorl_ops.rows.synthetic_documents import synthetic_docvqa_rows
from aerorl_ops.rows.task_item import TaskItem

SYNTHETIC_ITEMS: dict[str, Callable[[int, int, str], list[TaskItem]]] = {
    "docvqa": synthetic_docvqa_rows,
    "chartqa": synthetic_chartqa_rows,
}


def shown_with(item: TaskItem, instruction: str, question_type: str | None = None) -> TaskItem:
    """A checked one-image question as this environment shows it: its image, then the question and
    ``instruction``; ``question_type`` as given."""
    return replace(item, messages=(user_message(with_instruction(item.question, instruction), 1),),
                   question_type=question_type)


def load_benchmark_items(dataset: str, files: Sequence[str] = (), split: str = "validation",
                         limit: int | None = None, seed: int = 0, instruction: str = ANSWER_INSTRUCTION) -> LoadResult:
    """Items of ``dataset`` (``docvqa`` or ``chartqa``) from ``files``, else synthetic."""
    if files:
        paths = [Path(name) for name in files]
        loader = loader_for(dataset)
        result = loader.load(paths, split, limit)
        types = loader.question_types(paths, split, limit)
        items = [shown_with(item, instruction, types.get(item.item_id)) for item in result.items]
        return LoadResult(items=items, rejected=list(result.rejected))
    if limit is None:
        raise ValueError(f"{dataset}: synthetic rows need a count; pass limit=<rows to generate>, "
                         "or files=[...] to read dataset files")
    items = SYNTHETIC_ITEMS[dataset](limit, seed, split)
    return LoadResult(items=[shown_with(item, instruction) for item in items])


def _benchmark_env(dataset: str, files: Sequence[str], split: str, limit: int | None, seed: int,
                   instruction: str, reward_stack: WeightedRewardStack | None) -> SingleTurnEnv:
    stack = reward_stack if reward_stack is not None else build_reward_stack(require_json=True)
    data = load_benchmark_items(dataset, files, split, limit, seed, instruction)
    source = f"files {', '.join(map(str, files))}" if files else f"synthetic {split} rows, limit {limit}"
    return SingleTurnEnv(dataset, require_items(data, dataset, source), RewardStackGrader(stack))


def docvqa_env(files: Sequence[str] = (), split: str = "validation", limit: int | None = None, seed: int = 0,
               instruction: str = ANSWER_INSTRUCTION,
               reward_stack: WeightedRewardStack | None = None) -> SingleTurnEnv:
    """The ``docvqa`` environment: correct = ANLS >= 0.5."""
    return _benchmark_env("docvqa", files, split, limit, seed, instruction, reward_stack)


def chartqa_env(files: Sequence[str] = (), split: str = "validation", limit: int | None = None, seed: int = 0,
                instruction: str = ANSWER_INSTRUCTION,
                reward_stack: WeightedRewardStack | None = None) -> SingleTurnEnv:
    """The ``chartqa`` environment: correct = relaxed accuracy (5% numeric tolerance)."""
    return _benchmark_env("chartqa", files, split, limit, seed, instruction, reward_stack)
