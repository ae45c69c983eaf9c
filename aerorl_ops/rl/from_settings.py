"""What a run of the training settings trains: its ``AeroRLConfig``, ``TrainingPlan`` and environments.

Shared by the ``rl_run`` asset and ``benchmarks/bench_training.py``. ``settings`` is a
``TrainingSettings``, or any object with its field names (the asset's run config).
"""

from __future__ import annotations

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs import make_env
from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.rl.config import AeroRLConfig
from aerorl_ops.rl.training_run import TrainingPlan

TRAIN_SEED_OFFSET = 1000
EVAL_SAMPLE_SEED = 0


def rl_config_of(settings: TrainingSettings) -> AeroRLConfig:
    """The validated ``AeroRLConfig`` of ``settings`` (``ValueError`` names the first bad field)."""
    config = AeroRLConfig(quant_ref_bits=settings.quant_bits, algorithm=settings.algorithm,
                          group_size=settings.group_size, learning_rate=settings.learning_rate,
                          kl_coef=settings.kl_coef, seed=settings.seed, max_new_tokens=settings.max_new_tokens,
                          temperature=settings.temperature, top_k=settings.top_k, top_p=settings.top_p,
                          grad_accumulation=settings.grad_accumulation,
                          max_nonfinite_steps=settings.max_nonfinite_steps)
    config.validate()
    return config


def training_plan_of(settings: TrainingSettings) -> TrainingPlan:
    return TrainingPlan(warmup_steps=settings.warmup_steps, warmup_batch_size=settings.warmup_batch_size,
                        warmup_learning_rate=settings.warmup_learning_rate, rl_steps=settings.steps,
                        prompts_per_step=settings.prompts_per_step, eval_interval=settings.eval_interval,
                        checkpoint_interval=settings.checkpoint_interval, lr_schedule=settings.lr_schedule,
                        lr_warmup_steps=settings.lr_warmup_steps,
                        focus_types=tuple(t.strip() for t in settings.focus_types.split(",") if t.strip()),
                        focus_share=settings.focus_share, focus_until=settings.focus_until,
                        control=settings.control, swap_check_type=settings.swap_check_type)


def training_environments(settings: TrainingSettings, seed: int) -> tuple[TaskEnv, TaskEnv]:
    """The training environment (seeded by ``seed``) and the held-out one: a fixed sample (seed 0)
    of ``eval_size`` items of ``eval_split``."""
    train = make_env(settings.env, split=settings.train_split, limit=settings.train_limit or None,
                     seed=seed + TRAIN_SEED_OFFSET)
    held_out = make_env(settings.env, split=settings.eval_split, limit=settings.eval_size, seed=EVAL_SAMPLE_SEED)
    return train, held_out
