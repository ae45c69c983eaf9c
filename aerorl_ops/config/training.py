"""Training settings (the ``[training]`` table): what ``aerorl train`` / the ``rl_run`` asset runs.

The library's own training defaults (``AeroRLConfig``, ``TrainingPlan``) read theirs from here.
Cross-setting rules (a GRPO group needs at least two samples) are checked by
``AeroRLConfig.validate`` when a run starts. Named sets of overrides live in ``config.presets``.
"""

from __future__ import annotations

from dataclasses import dataclass

from aerorl_ops.config.fields import (
    boolean,
    fail,
    integer,
    non_negative_int,
    non_negative_number,
    one_of,
    positive_int,
    positive_number,
    probability,
    setting,
    text,
)

ALGORITHMS = ("grpo", "dr_grpo", "rloo", "reinforce_pp")
QUANT_REF_BITS = (4, 8, 16)
LR_SCHEDULES = ("constant", "cosine")


def _text_or_empty(where: str, name: str, value: object) -> str:
    """A string, which may be empty (= the feature is off)."""
    if not isinstance(value, str):
        raise fail(where, name, f"must be a string (empty to turn it off), got {value!r}")
    return value


@dataclass(frozen=True)
class TrainingSettings:
    """A supervised warm-up, then RL against a frozen quantized reference (see ``rl.training_run``)."""

    base_model: str = setting("tiny-qwen2-vl", help="model key from the config's [models], or a checkpoint directory",
                              check=text)
    env: str = setting("easy_vqa", help="task environment (aerorl_ops.envs registry): easy_vqa, docvqa, chartqa, ...",
                       check=text)
    train_split: str = setting("train", help="environment split the policy trains on", check=text)
    train_limit: int = setting(0, help="training items drawn from the split (0 = all; synthetic docvqa needs > 0)",
                               check=non_negative_int)
    eval_split: str = setting("test", help="environment split of the held-out sample", check=text)
    eval_size: int = setting(500, help="held-out questions: a fixed sample (seed 0) of the eval split",
                             check=positive_int)
    algorithm: str = setting("grpo", help="grpo, dr_grpo, rloo or reinforce_pp", check=one_of(*ALGORITHMS))
    steps: int = setting(60, help="RL steps after the warm-up", check=non_negative_int)
    warmup_steps: int = setting(30, help="supervised warm-up steps (stop at partial accuracy)",
                                check=non_negative_int)
    warmup_batch_size: int = setting(32, help="questions per supervised step", check=positive_int)
    warmup_learning_rate: float = setting(1e-3, help="supervised (warm-up and control) learning rate",
                                          check=positive_number)
    group_size: int = setting(8, help="samples per prompt", check=positive_int)
    prompts_per_step: int = setting(16, help="prompts per RL step", check=positive_int)
    learning_rate: float = setting(1e-3, help="RL learning rate", check=positive_number)
    lr_schedule: str = setting("constant", help="constant, or cosine (to 0) after lr_warmup_steps of linear warm-up; "
                               "applied within each phase", check=one_of(*LR_SCHEDULES))
    lr_warmup_steps: int = setting(0, help="linear learning-rate warm-up steps of the cosine schedule",
                                   check=non_negative_int)
    grad_accumulation: int = setting(1, help="micro-batches per optimizer update (same gradient, less memory)",
                                     check=positive_int)
    max_nonfinite_steps: int = setting(3, help="NaN/inf guard: stop after this many skipped updates in a row",
                                       check=positive_int)
    kl_coef: float = setting(0.04, help="k3 KL coefficient to the reference (0 = no reference is loaded)",
                             check=non_negative_number)
    quant_bits: int = setting(8, help="reference precision: 4 (nf4), 8 (int8) or 16",
                              check=one_of(*QUANT_REF_BITS, described="4 (nf4), 8 (int8) or 16"))
    temperature: float = setting(1.0, help="rollout sampling temperature", check=positive_number)
    top_p: float = setting(1.0, help="rollout nucleus sampling (1 = off)", check=probability)
    top_k: int = setting(0, help="rollout top-k sampling (0 = off)", check=non_negative_int)
    max_new_tokens: int = setting(4, help="maximum response length, in rollouts and held-out answers",
                                  check=positive_int)
    focus_types: str = setting("", help="curriculum: comma-separated question types oversampled in each batch "
                               "(e.g. colour,shape); empty = the natural mix",
                               check=_text_or_empty)
    focus_share: float = setting(0.75, help="curriculum: share of each batch drawn from focus_types",
                                 check=probability)
    focus_until: int = setting(0, help="curriculum: supervised steps that use the focus mix (then the natural mix)",
                               check=non_negative_int)
    control: bool = setting(True, help="also train supervised from the warm-up checkpoint for the RL phase's wall "
                            "time, and evaluate it (phase control)", check=boolean)
    swap_check_type: str = setting("colour", help="question type of the final image-swap check (empty = skip)",
                                   check=_text_or_empty)
    seed: int = setting(0, help="seed of data order, sampling and the training items", check=integer)
    eval_interval: int = setting(15, help="evaluate every N RL steps", check=positive_int)
    checkpoint_interval: int = setting(50, help="checkpoint every N steps", check=positive_int)


TRAINING_DEFAULTS = TrainingSettings()
"""The defaults as one value, for library code whose own defaults read from here."""
