"""Running models to evaluate them: MAYE's scheme on a task environment, and a model against its baseline.

- ``replies``: chat-templated prompts of observations, and ``n`` seeded responses per prompt at one
  sampling setting (special tokens suppressed, at most ``max_new_tokens``);
- ``runner``: ``evaluate_model``, every sampling setting on the items at ``indices``, graded by
  ``env.step``: per-sample records and per-setting metrics (``EvalOutcome``);
- ``summaries``: the metrics of one setting's responses, overall and per question type;
- ``compare``: paired 95% intervals of the accuracy difference of two outcomes;
- ``inputs``: a model key or checkpoint directory as a ``ModelEntry``, a configured dataset as an environment;
- ``comparison``: a model and its baseline, one after the other, on the same questions;
- ``records``: the ``eval_*`` DuckDB rows of outcomes and comparisons.

The model-free statistics (pass@k, reflection, paired tests) are ``aerorl_ops.evaluation``.
"""

from aerorl_ops.evaluator.compare import ComparisonRow, compare_outcomes
from aerorl_ops.evaluator.runner import EvalOutcome, SampleRecord, evaluate_model
from aerorl_ops.evaluator.summaries import ALL_TYPES, SettingMetrics

__all__ = ["ALL_TYPES", "ComparisonRow", "EvalOutcome", "SampleRecord", "SettingMetrics", "compare_outcomes",
           "evaluate_model"]
