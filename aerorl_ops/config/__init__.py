"""The settings layer: every user-facing setting and its default, declared once.

- ``fields``: how a setting is declared (default, check, help) and checked; ``ConfigError``;
- ``generation``: ``GenerationSettings`` (``[generation]``);
- ``rewards``: ``RewardSettings`` (``[rewards]``) and ``REWARD_COMPONENT_NAMES``;
- ``training``: ``TrainingSettings`` (``[training]``), and the ``Recipe`` a run trains with
  (``TrainingSettings.resolve()``: the algorithm's defaults filled in, once per run);
- ``algorithms``: the RL algorithms by name, each one's defaults, and the policy losses' names;
- ``benchmark``: ``BenchmarkConfig``, the whole file (``[benchmark]``, ``[models.*]`` and the above).

The Dagster run config (``assets.settings_config``) and the command-line flags
(``aerorl_pipeline.settings_flags``) are generated from these dataclasses. AeroRL's own defaults
for its replay CLI and reward builders are a separate setting, in ``aerorl_ops.aerorl_compat``.
"""
