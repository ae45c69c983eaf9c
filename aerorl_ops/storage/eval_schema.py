"""The evaluation tables: ``eval_runs``, ``eval_samples``, ``eval_metrics``, ``eval_comparisons``. Each is
declared once, as the dataclass of one row; its columns derive from the fields (``storage.columns``), after
the columns the row type lacks, which name its eval (``eval_id``) and, for the per-model tables, its
``role``: ``eval_runner.eval_rows.eval_tables`` gives every row of an eval its id and role.

An eval of a mixture (``envs.mixture``) also reports per source dataset (the mixture's parts): each
sample names its ``source``, and ``eval_metrics`` / ``eval_comparisons`` add one row per part over all
question types (``question_type`` = :data:`ALL_TYPES`, ``source`` = the part) after the rows over all
sources (``source`` = :data:`ALL_SOURCES`). The ``source`` columns came after the others; a table made
before them gains them through ``ensure_tables``, its earlier rows holding NULL there (read: all sources)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa

from aerorl_ops.storage.columns import column, record_columns
from aerorl_ops.storage.schema import TableSpec, required

MODEL_ROLE, BASELINE_ROLE = "model", "baseline"
"""The ``role`` of a model within an eval: the one evaluated, and the one it is compared with."""

EVAL_ID = required("eval_id", pa.string())
"""The first column of every evaluation table: the eval a row belongs to."""
ROLE = required("role", pa.string())
"""The second column of ``eval_samples`` and ``eval_metrics``: the model of the eval a row describes."""

ALL_TYPES = "all"
"""The ``question_type`` of metrics and comparisons over every question type."""
ALL_SOURCES = "all"
"""The ``source`` of metrics and comparisons over every source dataset (every row of an eval of one dataset)."""


def metric_groups(question_types: Sequence[str], sources: Sequence[str]) -> list[tuple[str, str]]:
    """The ``(question_type, source)`` of an eval's rows per setting, in their order: over everything, per
    question type, then per source (each over every type).

    >>> metric_groups(["colour"], ["shapes"])
    [('all', 'all'), ('colour', 'all'), ('all', 'shapes')]
    """
    return [*((question_type, ALL_SOURCES) for question_type in [ALL_TYPES, *question_types]),
            *((ALL_TYPES, source) for source in sources)]


@dataclass(frozen=True)
class EvalRunRow:
    """One model's evaluation within an eval: its ``eval_runs`` row less ``eval_id``
    (``eval_runner.eval_rows.EvalRunRecord`` builds it from an outcome).

    ``role`` is 'model' or 'baseline' (an eval of a model alone has only 'model'); ``model`` is the key or
    checkpoint directory as given; ``training_run_id`` and ``step`` are set when training recorded the
    evaluation."""

    role: str = column(required=True)
    model: str = column(required=True)
    model_source: str | None
    dataset: str | None
    split: str | None
    questions: int
    settings: str = column(pa.json_())  # JSON: the sampling settings, in order
    max_new_tokens: int
    seed: int = column(pa.int64())
    training_run_id: str | None
    step: int | None
    device: str | None
    started_at: datetime | None
    finished_at: datetime | None
    wall_s: float
    config: str | None = column(pa.json_())  # JSON: the eval's settings
    # dataset rows the environment rejected (None: not counted), each in ``rejected_rows`` under the eval id
    rejected_rows: int | None = None
    cpu_s: float | None = None  # this process's CPU time (core-seconds) for the evaluation, its model's load included


@dataclass(frozen=True)
class SampleRecord:
    """One response to one question at one setting: an ``eval_samples`` row less its eval and role.

    Question ``item_index`` of the dataset sample, response ``sample_no`` at ``setting``; ``source`` is the
    item's part (its ``dataset``) when the evaluated environment is a mixture, else None."""

    setting: str = column(required=True)
    item_index: int = column(required=True)
    item_id: str
    question_type: str | None
    sample_no: int = column(required=True)  # 0 .. n-1 within the question
    response: str
    correct: bool
    reward: float
    response_tokens: int  # generated tokens, EOS excluded
    truncated: bool  # reached max_new_tokens without an EOS
    reflection: bool  # holds one of MAYE's reflection words
    source: str | None = None
    turns: int | None = None  # a multi-turn environment's episode: the replies written (None: single-turn)


@dataclass(frozen=True)
class SettingMetrics:
    """One model's metrics at one setting over one question type and one source: an ``eval_metrics`` row less
    its eval and role (``eval_runner.summaries`` computes them). Wide: over every question (``question_type``
    and ``source`` = 'all'), per question type, and on a mixture per source (``question_type`` = 'all');
    ``accuracy`` is the mean unbiased pass@k; a reflection ratio with a zero denominator is None (NULL)."""

    setting: str = column(required=True)
    question_type: str = column(required=True)
    k: int
    samples_per_question: int
    questions: int
    responses: int
    accuracy: float
    accuracy_stderr: float
    pass_at_1: float
    reward_mean: float
    mean_length: float
    length_clip_ratio: float
    n_correct: int
    n_reflection: int
    reflection_ratio: float | None
    reflection_ratio_in_correct: float | None
    reflection_ratio_in_incorrect: float | None
    correct_ratio_in_reflection: float | None
    correct_ratio_in_no_reflection: float | None
    source: str = column(required=True, default=ALL_SOURCES)
    mean_turns: float | None = None  # a multi-turn environment's episodes: replies per episode (None: single-turn)


@dataclass(frozen=True)
class ComparisonRow:
    """Model minus baseline at one setting over one question type and one source (as in
    :class:`SettingMetrics`): an ``eval_comparisons`` row less its eval
    (``eval_runner.paired_differences`` computes them). The paired ``confidence`` interval of the accuracy
    difference: exact McNemar (with ``p_value``) where a setting draws one response per question, else the
    paired bootstrap (``resamples``)."""

    setting: str = column(required=True)
    question_type: str = column(required=True)
    method: str = column(required=True)  # "mcnemar_exact" or "paired_bootstrap"
    questions: int
    model_accuracy: float
    baseline_accuracy: float
    difference: float
    ci_low: float
    ci_high: float
    confidence: float
    b: int  # questions where the model scores higher
    c: int  # questions where the baseline scores higher
    p_value: float | None  # exact McNemar p-value; None for the bootstrap
    resamples: int | None  # bootstrap resamples; None for McNemar
    source: str = column(required=True, default=ALL_SOURCES)


DISTRIBUTION = pa.field("distribution", pa.string())
"""The last column of ``eval_samples``, ``eval_metrics`` and ``eval_comparisons``: the ``[datasets]`` name of the
held-out distribution an eval scored (one that its dataset's ``held_out`` names); NULL for the dataset itself,
for an evaluation during training, and in rows written before the column existed."""

EVAL_RUNS = TableSpec("eval_runs", pa.schema([EVAL_ID, *record_columns(EvalRunRow)]), ("eval_id",))
EVAL_SAMPLES = TableSpec("eval_samples", pa.schema([EVAL_ID, ROLE, *record_columns(SampleRecord), DISTRIBUTION]),
                         ("eval_id",))
EVAL_METRICS = TableSpec("eval_metrics", pa.schema([EVAL_ID, ROLE, *record_columns(SettingMetrics), DISTRIBUTION]),
                         ("eval_id",))
EVAL_COMPARISONS = TableSpec("eval_comparisons", pa.schema([EVAL_ID, *record_columns(ComparisonRow), DISTRIBUTION]),
                             ("eval_id",))

EVAL_TABLES = (EVAL_RUNS, EVAL_SAMPLES, EVAL_METRICS, EVAL_COMPARISONS)
