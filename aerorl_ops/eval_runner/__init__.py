"""Running models to evaluate them: MAYE's scheme on a task environment, a model against its baseline,
and the greedy held-out evaluation a training run makes.

- ``replies``: chat-templated prompts of observations, and ``n`` seeded responses per prompt at one
  sampling setting (special tokens suppressed, at most ``max_new_tokens``);
- ``episodes``: one greedy or sampled reply per episode of an environment, graded by ``env.step``
  (what held-out evaluation and training rollouts share);
- ``held_out``: greedy accuracy of a policy on held-out items, the no-image prior, the image-swap check;
- ``runner``: ``evaluate_model``, every sampling setting on the items at ``indices``, graded by
  ``env.step``: per-sample records and per-setting metrics (``EvalOutcome``);
- ``summaries``: the metrics of one setting's responses, overall, per question type and (on a mixture)
  per source dataset;
- ``paired_differences``: paired 95% intervals of the accuracy difference of two outcomes, for the same
  groups;
- ``model_vs_baseline``: a model and its baseline, one after the other, on the same questions;
- ``eval_rows``: the ``eval_*`` DuckDB rows of outcomes and comparisons.

The model-free statistics (pass@k, reflection, paired tests) are ``aerorl_ops.eval_metrics``.
"""
