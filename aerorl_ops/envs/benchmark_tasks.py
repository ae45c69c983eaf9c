"""``docvqa`` and ``chartqa``: the benchmark's rows as environments, graded by the benchmark's reward stack.

Rows come from the same places as the ``docvqa_rows`` / ``chartqa_rows`` assets: the
embedded synthetic generator (no ``files``; ``limit`` rows generated with ``seed``), or
Hugging Face dataset files on disk (``files``; the hub loaders of ``aerorl_ops.rows``, which
take the first ``limit`` records in file order, so ``seed`` is unused there). Rows the
loaders reject are the environment's rejections. ChartQA files in lmms-lab's layout give
each item its ``type`` (``human_test`` / ``augmented_test``) as question type; other rows
have none. A dataset with no usable row is a ``NoUsableRowsError`` naming its files.

The prompt is the benchmark's: the question, then an instruction asking for strict JSON
``{"answer": ...}``. So the default reward stack requires JSON, with the stack's other
settings at their defaults; pass ``reward_stack`` to score otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from aerorl_ops.envs.base import SingleTurnEnv
from aerorl_ops.envs.messages import user_message, with_instruction
from aerorl_ops.envs.rejections import require_items
from aerorl_ops.envs.reward_stack_grader import RewardStackGrader
from aerorl_ops.envs.types import TaskData, TaskItem
from aerorl_ops.rewards.stack import WeightedRewardStack, build_reward_stack
from aerorl_ops.rows.hf_loaders import loader_for
from aerorl_ops.rows.row import Row
from aerorl_ops.rows.synthetic_charts import synthetic_chartqa_rows
from aerorl_ops.rows.synthetic_documents import synthetic_docvqa_rows

JSON_ANSWER_INSTRUCTION = 'Answer with strict JSON of the form {"answer": "<answer>"} and nothing else.'
SYNTHETIC_ROWS: dict[str, Callable[[int, int, str], list[Row]]] = {
    "docvqa": synthetic_docvqa_rows,
    "chartqa": synthetic_chartqa_rows,
}


def item_from_row(row: Row, instruction: str, question_type: str | None = None) -> TaskItem:
    """A checked dataset row as a one-image task item."""
    return TaskItem(item_id=row.sample_id, dataset=row.dataset, split=row.split, source=row.source,
                    question=row.question, answers=row.answers, images=(row.image_bytes,),
                    messages=(user_message(with_instruction(row.question, instruction), 1),),
                    question_type=question_type, evidence_entities=row.evidence_entities)


def load_benchmark_rows(dataset: str, files: Sequence[str] = (), split: str = "validation",
                        limit: int | None = None, seed: int = 0,
                        instruction: str = JSON_ANSWER_INSTRUCTION) -> TaskData:
    """Items of ``dataset`` (``docvqa`` or ``chartqa``) from ``files``, else synthetic."""
    if files:
        paths = [Path(name) for name in files]
        loader = loader_for(dataset)
        result = loader.load(paths, split, limit)
        types = loader.question_types(paths, split, limit)
        items = [item_from_row(row, instruction, types.get(row.sample_id)) for row in result.rows]
        return TaskData(items=items, rejected=list(result.rejected))
    if limit is None:
        raise ValueError(f"{dataset}: synthetic rows need a count; pass limit=<rows to generate>, "
                         "or files=[...] to read dataset files")
    rows = SYNTHETIC_ROWS[dataset](limit, seed, split)
    return TaskData(items=[item_from_row(row, instruction) for row in rows])


def _benchmark_env(dataset: str, files: Sequence[str], split: str, limit: int | None, seed: int,
                   instruction: str, reward_stack: WeightedRewardStack | None) -> SingleTurnEnv:
    stack = reward_stack if reward_stack is not None else build_reward_stack(require_json=True)
    data = load_benchmark_rows(dataset, files, split, limit, seed, instruction)
    source = f"files {', '.join(map(str, files))}" if files else f"synthetic {split} rows, limit {limit}"
    return SingleTurnEnv(dataset, require_items(data, dataset, source), RewardStackGrader(stack))


def docvqa_env(files: Sequence[str] = (), split: str = "validation", limit: int | None = None, seed: int = 0,
               instruction: str = JSON_ANSWER_INSTRUCTION,
               reward_stack: WeightedRewardStack | None = None) -> SingleTurnEnv:
    """The ``docvqa`` environment: correct = ANLS >= 0.5."""
    return _benchmark_env("docvqa", files, split, limit, seed, instruction, reward_stack)


def chartqa_env(files: Sequence[str] = (), split: str = "validation", limit: int | None = None, seed: int = 0,
                instruction: str = JSON_ANSWER_INSTRUCTION,
                reward_stack: WeightedRewardStack | None = None) -> SingleTurnEnv:
    """The ``chartqa`` environment: correct = relaxed accuracy (5% numeric tolerance)."""
    return _benchmark_env("chartqa", files, split, limit, seed, instruction, reward_stack)
