"""A model's evaluation against its baseline's on the same questions: the paired accuracy difference.

Per setting and question type (``"all"`` and each type), then on a mixture per source dataset (each of
its parts reported on, over every question type), each question has one score per model:
its pass@k estimate. Where a setting draws one response per question (``n = 1``: pass@1 at
temperature 0.6, near-greedy or greedy) the scores are right/wrong and the interval is the exact
McNemar one (``aerorl_ops.eval_metrics.paired.mcnemar_exact``, with its p-value); with several
responses the scores lie in [0, 1] and the interval is the seeded paired bootstrap
(``paired_bootstrap``). Both are intervals of ``mean(model) - mean(baseline)``.
"""

from __future__ import annotations

from aerorl_ops.eval_metrics.paired import PairedComparison, mcnemar_exact, paired_bootstrap
from aerorl_ops.eval_runner.runner import EvalOutcome
from aerorl_ops.storage.eval_schema import ALL_SOURCES, ComparisonRow, metric_groups


def comparison_row(setting: str, question_type: str, result: PairedComparison,
                   source: str = ALL_SOURCES) -> ComparisonRow:
    """The ``eval_comparisons`` row of ``result``, the paired difference at ``setting`` over ``question_type``
    and ``source``."""
    return ComparisonRow(
        setting=setting, question_type=question_type, method=result.method, questions=result.n,
        model_accuracy=result.model_accuracy, baseline_accuracy=result.baseline_accuracy, difference=result.difference,
        ci_low=result.ci_low, ci_high=result.ci_high, confidence=result.confidence, b=result.b, c=result.c,
        p_value=result.p_value, resamples=result.resamples, source=source)


def _check_same_questions(model: EvalOutcome, baseline: EvalOutcome) -> None:
    if model.indices != baseline.indices:
        raise ValueError("the model and the baseline were evaluated on different questions; evaluate both on the "
                         "same indices")
    if model.settings != baseline.settings:
        raise ValueError(f"the model was evaluated at {[s.label for s in model.settings]} but the baseline at "
                         f"{[s.label for s in baseline.settings]}; use the same sampling settings")
    if model.sources() != baseline.sources():
        raise ValueError(f"the model was evaluated on the sources {model.sources()} but the baseline on "
                         f"{baseline.sources()}; evaluate both on the same dataset")


def compare_outcomes(model: EvalOutcome, baseline: EvalOutcome, resamples: int = 10_000, confidence: float = 0.95,
                     seed: int = 0) -> tuple[ComparisonRow, ...]:
    """The paired difference at every setting, over all questions, per question type, then per source (the
    order of ``eval_metrics``)."""
    _check_same_questions(model, baseline)
    rows = []
    for setting in model.settings:
        for question_type, source in metric_groups(model.question_types(), model.sources()):
            model_indices, model_scores = model.question_scores(setting.name, question_type, source)
            baseline_indices, baseline_scores = baseline.question_scores(setting.name, question_type, source)
            if model_indices != baseline_indices:  # the same items in the same order, so this is a bug
                raise ValueError(f"setting {setting.name!r}, type {question_type!r}, source {source!r}: the two "
                                 "outcomes' questions differ in order")
            if setting.n == 1:
                result = mcnemar_exact(model_scores, baseline_scores, confidence)
            else:
                result = paired_bootstrap(model_scores, baseline_scores, resamples, confidence, seed)
            rows.append(comparison_row(setting.name, question_type, result, source))
    return tuple(rows)
