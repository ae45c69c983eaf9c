"""Score one partition's generations: the reward stack, the standard metrics and the manual baseline.

Scoring is columnar from the generations table to the score table: the reward stack scores the
whole table at once through the columnar engine (``evaluate_table``, the same numbers as the
per-record stack), and the score table is assembled column by column. The standard metric and the
manual baseline are Python string rules, applied to the response and reference columns.

``correct`` is each row's task accuracy, the test its dataset's environment grades with: DocVQA
ANLS >= 0.5, ChartQA relaxed accuracy, ARC an exact grid match (``text.arc_grids``; ``cell_accuracy``
its partial score), exact match
after normalisation for every other kind (easy-VQA, JSONL, Parquet). A row's kind comes from
``kinds`` (dataset name -> environment kind, from the config's ``[datasets]``); a dataset not in it is
its own kind.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict

import pyarrow as pa
import pyarrow.compute as pc

from aerorl_ops.config.rewards import REWARD_COMPONENT_NAMES, RewardSettings
from aerorl_ops.metrics import ANLS_CORRECT, RELAXED_ACCURACY_CORRECT, anls, relaxed_accuracy
from aerorl_ops.rewards.columnar import evaluate_table
from aerorl_ops.rewards.replay_lines import REPLAY_SCHEMA
from aerorl_ops.rewards.stack import WeightedRewardStack, build_reward_stack
from aerorl_ops.rewards.verifiers import prediction_text
from aerorl_ops.storage.schema import SCORE_FIELDS, output_schema
from aerorl_ops.text.arc_grids import grid_scores
from aerorl_ops.text.exact_match import answers_match, predicted_answer

SCORE_SCHEMA = output_schema(SCORE_FIELDS)
"""The columns of the ``reward_scores`` table (``aerorl_ops.storage.schema``) less the partition key."""

_NEEDED_FOR_REWARDS = ("prompt", "response", "evidence_entities", "claimed_entities", "latency_ms")


def reward_stack_for(settings: RewardSettings) -> WeightedRewardStack:
    return build_reward_stack(weights=settings.weights, require_json=settings.require_json,
                              regex_pattern=settings.regex_pattern, target_tokens=settings.target_tokens,
                              latency_budget_ms=settings.latency_budget_ms)


def reward_config(settings: RewardSettings) -> str:
    """The settings the scores were computed with, as the JSON of the ``reward_config`` column (the
    judge's, ``[rewards.judge]``, only when one is configured)."""
    config = {"weights": settings.weights, "require_json": settings.require_json,
              "regex_pattern": settings.regex_pattern, "target_tokens": settings.target_tokens,
              "latency_budget_ms": settings.latency_budget_ms, "pass_threshold": settings.pass_threshold}
    if settings.judge is not None:
        config["judge"] = asdict(settings.judge)
    return json.dumps(config, sort_keys=True)


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


def is_correct(kind: str, response: str, references: Sequence[str], anls_score: float | None,
               relaxed: float | None) -> bool:
    """The task accuracy of one answer, as its kind's environment grades it.

    >>> is_correct("easy_vqa", "Teal.", ["teal"], None, None), is_correct("docvqa", "x", ["y"], 0.2, None)
    (True, False)
    >>> is_correct("arc", "The grid:\\n0 1\\n1 0", ["01\\n10"], None, None)
    True
    """
    if kind == "docvqa":
        return anls_score is not None and anls_score >= ANLS_CORRECT
    if kind == "chartqa":
        return relaxed is not None and relaxed >= RELAXED_ACCURACY_CORRECT
    if kind == "arc":
        return bool(references) and grid_scores(response, references[0]).exact
    return bool(references) and answers_match(predicted_answer(response), references)


def cell_accuracy(kind: str, response: str, references: Sequence[str]) -> float | None:
    """An ARC row's partial score: the share of the answer grid's cells the reply's grid matches (0 when it
    holds no grid or one of another size); None for any other kind.

    >>> cell_accuracy("arc", "01\\n11", ["01\\n10"]), cell_accuracy("easy_vqa", "red", ["red"])
    (0.75, None)
    """
    if kind != "arc" or not references:
        return None
    return grid_scores(response, references[0]).cell_accuracy


def replay_table(generations: pa.Table, kinds: Mapping[str, str] | None = None) -> pa.Table:
    """The columns of a generations table that the reward components read, as a replay table
    (``REPLAY_SCHEMA``): no copy of the strings, each reference a list of aliases."""
    for name in _NEEDED_FOR_REWARDS:
        column = generations.column(name)
        if column.null_count:
            sample_ids = generations.column("sample_id").filter(pc.is_null(column)).to_pylist()
            raise ValueError(f"generations: {name} is null for sample ids {sample_ids[:5]}; "
                             "every generation needs a prompt, a response, entity lists and a latency to be scored")
    reference = generations.column("reference")
    kinds = kinds or {}
    dataset_kinds = pa.array([kinds.get(name, name) if name is not None else None
                              for name in generations.column("dataset").to_pylist()], pa.string())
    columns = {
        "id": generations.column("sample_id"),
        "reference": reference,
        "reference_is_list": pc.is_valid(reference),
        **{name: generations.column(name) for name in (*_NEEDED_FOR_REWARDS, "raw_response")},
        "dataset": dataset_kinds,  # the reward stack's dataset metrics key on the kind
    }
    return pa.Table.from_arrays([columns[field.name].cast(field.type) for field in REPLAY_SCHEMA],
                                schema=REPLAY_SCHEMA)


def score_generations(generations: pa.Table, settings: RewardSettings,
                      kinds: Mapping[str, str] | None = None) -> pa.Table:
    """One ``SCORE_SCHEMA`` row per generation, in the same order; ``kinds`` maps dataset names to kinds."""
    if generations.num_rows == 0:
        return SCORE_SCHEMA.empty_table()
    kinds = kinds or {}
    summary = evaluate_table(replay_table(generations, kinds), reward_stack_for(settings),
                             pass_threshold=settings.pass_threshold)
    results = summary["results"]  # id, total, one column per component
    totals = results.column("total")
    responses = generations.column("response").to_pylist()
    references = [aliases or [] for aliases in generations.column("reference").to_pylist()]
    row_kinds = [kinds.get(dataset, dataset) for dataset in generations.column("dataset").to_pylist()]
    metrics = [standard_metric(kind, prediction_text(response), aliases)
               for kind, response, aliases in zip(row_kinds, responses, references, strict=True)]
    correct = [is_correct(kind, response, aliases, *metric)
               for kind, response, aliases, metric in zip(row_kinds, responses, references, metrics, strict=True)]
    rows = generations.num_rows
    columns = {
        "sample_id": generations.column("sample_id"),
        "dataset": generations.column("dataset"),
        **{name: results.column(name) if name in results.column_names else pa.nulls(rows, pa.float64())
           for name in REWARD_COMPONENT_NAMES},
        "total_reward": totals,
        "passed": pc.greater_equal(totals, settings.pass_threshold),
        "manual_pass": pa.array([manual_pass(response, aliases)
                                 for response, aliases in zip(responses, references, strict=True)], pa.bool_()),
        "anls": pa.array([anls_score for anls_score, _ in metrics], pa.float64()),
        "relaxed_accuracy": pa.array([relaxed for _, relaxed in metrics], pa.float64()),
        "correct": pa.array(correct, pa.bool_()),
        "reward_config": pa.array([reward_config(settings)] * rows, pa.string()),
        "judge": pa.nulls(rows, pa.float64()),  # the judge's scores, when one grades (rewards.judge_table)
        "cell_accuracy": pa.array([cell_accuracy(kind, response, aliases) for kind, response, aliases
                                   in zip(row_kinds, responses, references, strict=True)], pa.float64()),
    }
    return pa.Table.from_pydict(columns, schema=SCORE_SCHEMA)
