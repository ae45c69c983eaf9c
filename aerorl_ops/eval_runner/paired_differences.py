"""A model's evaluation against its baseline's on the same questions: the paired accuracy difference.

Per setting and question type (``"all"`` and each type), each question has one score per model:
its pass@k estimate. Where a setting draws one response per question (``n = 1``: pass@1 at
temperature 0.6, near-greedy or greedy) the scores are right/wrong and the interval is the exact
McNemar one (``aerorl_ops.eval_metrics.paired.mcnemar_exact``, with its p-value); with several
responses the scores lie in [0, 1] and the interval is the seeded paired bootstrap
(``paired_bootstrap``). Both are intervals of ``mean(model) - mean(baseline)``.
"""

from __future__ import annotations

from aerorl_ops.eval_metrics.paired import PairedComparison, mcnemar_exact, paired_bootstrap
from aerorl_ops.eval_runner.runner import EvalOutcome
from aerorl_ops.eval_runner.summaries import ALL_TYPES
from aerorl_ops.storage.eval_schema import ComparisonRow


def comparison_row(setting: str, question_type: str, result: PairedComparison) -> ComparisonRow:
    """The ``eval_comparisons`` row of ``result``, the paired difference at ``setting`` over ``question_type``."""
    return ComparisonRow(
        setting=setting, question_type=question_type, method=result.method, questions=result.n,
        model_accuracy=result.model_accuracy, baseline_accuracy=result.baseline_accuracy, difference=result.difference,
        ci_low=result.ci_low, ci_high=result.ci_high, confidence=result.confidence, b=result.b, c=result.c,
        p_value=result.p_value, resamples=result.resamples)


def _check_same_questions(model: EvalOutcome, baseline: EvalOutcome) -> None:
    if model.indices != baseline.indices:
        raise ValueError("the model and the baseline were evaluated on different questions; evaluate both on the "
                         "same indices")
    if model.settings != baseline.settings:
        raise ValueError(f"the model was evaluated at {[s.label for s in model.settings]} but the baseline at "
                         f"{[s.label for s in baseline.settings]}; use the same sampling settings")


def compare_outcomes(model: EvalOutcome, baseline: EvalOutcome, resamples: int = 10_000, confidence: float = 0.95,
                     seed: int = 0) -> tuple[ComparisonRow, ...]:
    """The paired difference at every setting, over all questions and per question type."""
    _check_same_questions(model, baseline)
    rows = []
    for setting in model.settings:
        for question_type in [ALL_TYPES, *model.question_types()]:
            model_indices, model_scores = model.question_scores(setting.name, question_type)
            baseline_indices, baseline_scores = baseline.question_scores(setting.name, question_type)
            if model_indices != baseline_indices:  # the same items in the same order, so this is a bug
                raise ValueError(f"setting {setting.name!r}, type {question_type!r}: the two outcomes' questions "
                                 "differ in order")
            if setting.n == 1:
                result = mcnemar_exact(model_scores, baseline_scores, confidence)
            else:
                result = paired_bootstrap(model_scores, baseline_scores, resamples, confidence, seed)
            rows.append(comparison_row(setting.name, question_type, result))
    return tuple(rows)
