"""Model-free evaluation metrics: MAYE's evaluation scheme and paired model comparisons.

Pure functions on Python / numpy / CPU-tensor values; nothing here generates, trains or stores.

- ``pass_at_k``: the unbiased pass@k estimator, per question and averaged;
- ``sampling``: ``SamplingSetting`` and MAYE's three settings;
- ``lengths``, ``reflection``, ``response_metrics``: response length, length-clip ratio and
  MAYE's reflection metrics;
- ``paired``: paired bootstrap and exact McNemar comparison of a model with its baseline;
- ``binomial``: standard error and exact interval of a proportion;
- ``accuracy``: accuracy with its standard error, overall and per question type;
- ``episodes``: whole episodes of a multi-turn environment: success, mean return and mean turns with standard
  errors;
- ``outcomes``: input checks shared by the above.
"""
