"""The evaluation tables: ``eval_runs``, ``eval_samples``, ``eval_metrics``, ``eval_comparisons``."""

from __future__ import annotations

import pyarrow as pa

from aerorl_ops.storage.schema import TIMESTAMP, TableSpec, required

MODEL_ROLE, BASELINE_ROLE = "model", "baseline"
"""The ``role`` of a model within an eval: the one evaluated, and the one it is compared with."""

EVAL_RUNS = TableSpec(
    "eval_runs",
    pa.schema([
        required("eval_id", pa.string()),
        required("role", pa.string()),
        required("model", pa.string()),
        ("model_source", pa.string()),
        ("dataset", pa.string()),
        ("split", pa.string()),
        ("questions", pa.int32()),
        ("settings", pa.json_()),
        ("max_new_tokens", pa.int32()),
        ("seed", pa.int64()),
        ("training_run_id", pa.string()),
        ("step", pa.int32()),
        ("device", pa.string()),
        ("started_at", TIMESTAMP),
        ("finished_at", TIMESTAMP),
        ("wall_s", pa.float64()),
        ("config", pa.json_()),
        ("rejected_rows", pa.int32()),
        ("cpu_s", pa.float64()),
    ]),
    ("eval_id",),
)
"""One model's evaluation within an eval (``aerorl_ops.eval_runner.eval_rows.EvalRunRecord``): ``role`` is
'model' or 'baseline' (an eval of a model alone has only 'model'); ``model`` is the key or checkpoint
directory as given; ``settings`` the sampling settings as JSON; ``training_run_id`` and ``step`` are set
when training recorded the evaluation; ``rejected_rows``: the dataset rows its environment rejected
(each in ``rejected_rows`` under the eval id)."""

EVAL_SAMPLES = TableSpec(
    "eval_samples",
    pa.schema([
        required("eval_id", pa.string()),
        required("role", pa.string()),
        required("setting", pa.string()),
        required("item_index", pa.int32()),
        ("item_id", pa.string()),
        ("question_type", pa.string()),
        required("sample_no", pa.int32()),
        ("response", pa.string()),
        ("correct", pa.bool_()),
        ("reward", pa.float64()),
        ("response_tokens", pa.int32()),
        ("truncated", pa.bool_()),
        ("reflection", pa.bool_()),
    ]),
    ("eval_id",),
)
"""One response (``aerorl_ops.eval_runner.runner.SampleRecord``): question ``item_index`` of the dataset
sample, response ``sample_no`` at ``setting``; its length in tokens (EOS excluded), whether it was cut at
the maximum length, and whether it holds one of MAYE's reflection words."""

EVAL_METRICS = TableSpec(
    "eval_metrics",
    pa.schema([
        required("eval_id", pa.string()),
        required("role", pa.string()),
        required("setting", pa.string()),
        required("question_type", pa.string()),
        *[(name, pa.int32()) for name in ("k", "samples_per_question", "questions", "responses")],
        *[(name, pa.float64()) for name in ("accuracy", "accuracy_stderr", "pass_at_1", "reward_mean", "mean_length",
                                            "length_clip_ratio")],
        ("n_correct", pa.int32()),
        ("n_reflection", pa.int32()),
        *[(name, pa.float64()) for name in ("reflection_ratio", "reflection_ratio_in_correct",
                                            "reflection_ratio_in_incorrect", "correct_ratio_in_reflection",
                                            "correct_ratio_in_no_reflection")],
    ]),
    ("eval_id",),
)
"""One model's metrics at one setting (``aerorl_ops.eval_runner.summaries.SettingMetrics``), wide: over every
question (``question_type`` = 'all') and per question type. ``accuracy`` is the mean unbiased pass@k;
a reflection ratio with a zero denominator is NULL."""

EVAL_COMPARISONS = TableSpec(
    "eval_comparisons",
    pa.schema([
        required("eval_id", pa.string()),
        required("setting", pa.string()),
        required("question_type", pa.string()),
        required("method", pa.string()),
        ("questions", pa.int32()),
        *[(name, pa.float64()) for name in ("model_accuracy", "baseline_accuracy", "difference", "ci_low", "ci_high",
                                            "confidence")],
        ("b", pa.int32()),
        ("c", pa.int32()),
        ("p_value", pa.float64()),
        ("resamples", pa.int32()),
    ]),
    ("eval_id",),
)
"""Model minus baseline at one setting and question type (``aerorl_ops.eval_runner.paired_differences.ComparisonRow``):
the paired ``confidence`` interval of the accuracy difference, exact McNemar (with ``p_value``) where a
setting draws one response per question, else the paired bootstrap (``resamples``)."""

EVAL_TABLES = (EVAL_RUNS, EVAL_SAMPLES, EVAL_METRICS, EVAL_COMPARISONS)
