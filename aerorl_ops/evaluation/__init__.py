"""Model-free evaluation metrics: MAYE's evaluation scheme and paired model comparisons.

Pure functions on Python / numpy / CPU-tensor values; nothing here generates, trains or stores.

- ``pass_at_k``: the unbiased pass@k estimator, per question and averaged;
- ``sampling``: ``SamplingSetting`` and MAYE's three settings;
- ``lengths``, ``reflection``, ``response_metrics``: response length, length-clip ratio and
  MAYE's reflection metrics;
- ``paired``: paired bootstrap and exact McNemar comparison of a model with its baseline;
- ``binomial``: standard error and exact interval of a proportion;
- ``accuracy``: accuracy with its standard error, overall and per question type;
- ``outcomes``: input checks shared by the above.
"""

from aerorl_ops.evaluation.accuracy import Accuracy, AccuracyReport, accuracy_report
from aerorl_ops.evaluation.binomial import binomial_stderr, clopper_pearson
from aerorl_ops.evaluation.lengths import LengthMetrics, length_metrics
from aerorl_ops.evaluation.paired import (
    PairedComparison,
    mcnemar_exact,
    mcnemar_p_value,
    paired_bootstrap,
)
from aerorl_ops.evaluation.pass_at_k import (
    mean_pass_at_k,
    pass_at_k,
    pass_at_k_per_question,
)
from aerorl_ops.evaluation.reflection import (
    REFLECTION_WORDS,
    ReflectionMetrics,
    has_reflection,
    reflection_metrics,
    reflection_ratios,
    reflection_word_counts,
)
from aerorl_ops.evaluation.response_metrics import ResponseMetrics, response_metrics
from aerorl_ops.evaluation.sampling import MAYE_SAMPLING_SETTINGS, SamplingSetting

__all__ = [
    "MAYE_SAMPLING_SETTINGS",
    "REFLECTION_WORDS",
    "LengthMetrics",
    "PairedComparison",
    "ReflectionMetrics",
    "ResponseMetrics",
    "SamplingSetting",
    "Accuracy",
    "AccuracyReport",
    "accuracy_report",
    "binomial_stderr",
    "clopper_pearson",
    "has_reflection",
    "length_metrics",
    "mcnemar_exact",
    "mcnemar_p_value",
    "mean_pass_at_k",
    "paired_bootstrap",
    "pass_at_k",
    "pass_at_k_per_question",
    "reflection_metrics",
    "reflection_ratios",
    "reflection_word_counts",
    "response_metrics",
]
