"""Training settings (the ``[training]`` table): what ``aerorl train`` / the ``rl_run`` asset runs.

The library's own training defaults (``AeroRLConfig``, ``TrainingPlan``) read theirs from here.
Cross-setting rules (a GRPO group needs at least two samples) are checked by
``AeroRLConfig.validate`` when a run starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from aerorl_ops.config.fields import (
    integer,
    non_negative_int,
    non_negative_number,
    one_of,
    positive_int,
    positive_number,
    setting,
    text,
)

ALGORITHMS = ("grpo", "reinforce_pp")
QUANT_REF_BITS = (4, 8, 16)


@dataclass(frozen=True)
class TrainingSettings:
    """A supervised warm-up, then RL against a frozen quantized reference (see ``rl.training_run``)."""

    base_model: str = setting("tiny-qwen2-vl", help="model key from the config's [models], or a checkpoint directory",
                              check=text)
    algorithm: str = setting("grpo", help="grpo or reinforce_pp", check=one_of(*ALGORITHMS))
    steps: int = setting(40, help="RL steps after the warm-up", check=non_negative_int)
    warmup_steps: int = setting(100, help="supervised warm-up steps", check=non_negative_int)
    group_size: int = setting(8, help="samples per prompt", check=positive_int)
    prompts_per_step: int = setting(4, help="prompts per RL step", check=positive_int)
    learning_rate: float = setting(3e-4, help="RL learning rate", check=positive_number)
    warmup_learning_rate: float = setting(3e-3, help="warm-up learning rate", check=positive_number)
    kl_coef: float = setting(0.04, help="KL coefficient to the reference", check=non_negative_number)
    quant_bits: int = setting(4, help="reference precision: 4 (nf4), 8 (int8) or 16",
                              check=one_of(*QUANT_REF_BITS, described="4 (nf4), 8 (int8) or 16"))
    seed: int = setting(0, help="seed (added to the benchmark seed for the training rows)", check=integer)
    max_new_tokens: int = setting(16, help="new tokens per rollout and per held-out answer", check=positive_int)
    eval_interval: int = setting(10, help="evaluate every N RL steps", check=positive_int)
    checkpoint_interval: int = setting(20, help="checkpoint every N steps", check=positive_int)
    train_rows: int = setting(64, help="synthetic training rows", check=positive_int)
    eval_rows: int = setting(16, help="synthetic held-out rows", check=positive_int)


TRAINING_DEFAULTS = TrainingSettings()
"""The defaults as one value, for library code whose own defaults read from here."""
