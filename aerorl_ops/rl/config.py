"""``AeroRLConfig``: AeroRL's config fields plus the RL algorithm and its hyperparameters."""

from __future__ import annotations

import math
from dataclasses import dataclass

from aerorl_ops.aerorl_compat import TRAINER_BACKENDS
from aerorl_ops.config.training import ALGORITHMS, QUANT_REF_BITS
from aerorl_ops.config.training import TRAINING_DEFAULTS as DEFAULTS

GROUP_ALGORITHMS = ("grpo", "dr_grpo", "rloo")


@dataclass(slots=True)
class AeroRLConfig:
    """What to train and how.

    AeroRL's fields: ``zero_copy_kv`` (descriptive), ``mask_vision_tokens``, ``quant_ref_bits``
    (4 = bitsandbytes nf4, 8 = bitsandbytes int8, 16 = unquantized), ``trainer_backend``
    (``auto`` and ``torch`` run this project's own trainer; ``trl``/``verl`` are accepted for
    compatibility and reported, but training always runs here).

    RL fields: ``algorithm`` (``grpo``, ``dr_grpo``, ``rloo`` or ``reinforce_pp``), ``group_size``
    samples per prompt, ``learning_rate``, ``kl_coef`` (k3 KL to the reference; 0 = no reference),
    ``clip_eps`` (importance-ratio clip), sampling (``temperature``, ``top_k`` 0 = off, ``top_p``
    1 = off), ``max_new_tokens`` (the maximum response length), ``max_grad_norm``,
    ``grad_accumulation`` (micro-batches per update), ``max_nonfinite_steps`` (NaN/inf guard), ``seed``.

    Defaults shared with the pipeline's training settings (quantization, algorithm, group size,
    learning rate, KL, new tokens, seed) come from ``config.training.TrainingSettings``.
    """

    zero_copy_kv: bool = True
    mask_vision_tokens: bool = True
    quant_ref_bits: int = DEFAULTS.quant_bits
    trainer_backend: str = "auto"
    algorithm: str = DEFAULTS.algorithm
    group_size: int = DEFAULTS.group_size
    learning_rate: float = DEFAULTS.learning_rate
    kl_coef: float = DEFAULTS.kl_coef
    clip_eps: float = 0.2
    temperature: float = DEFAULTS.temperature
    top_k: int = DEFAULTS.top_k
    top_p: float = DEFAULTS.top_p
    max_new_tokens: int = DEFAULTS.max_new_tokens
    max_grad_norm: float = 1.0
    grad_accumulation: int = DEFAULTS.grad_accumulation
    max_nonfinite_steps: int = DEFAULTS.max_nonfinite_steps
    seed: int = DEFAULTS.seed

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first invalid field."""
        if self.quant_ref_bits not in QUANT_REF_BITS:
            raise ValueError(f"quant_ref_bits must be one of {{4, 8, 16}}, got {self.quant_ref_bits!r}")
        if self.trainer_backend not in TRAINER_BACKENDS:
            raise ValueError(f"trainer_backend must be one of {TRAINER_BACKENDS}, got {self.trainer_backend!r}")
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {self.algorithm!r}")
        _require(self.group_size >= 2 if self.algorithm in GROUP_ALGORITHMS else self.group_size >= 1, "group_size",
                 self.group_size, f">= 2 for {'/'.join(GROUP_ALGORITHMS)} (advantages are relative within a group), "
                 ">= 1 otherwise")
        _require(self.grad_accumulation >= 1, "grad_accumulation", self.grad_accumulation, ">= 1")
        _require(self.max_nonfinite_steps >= 1, "max_nonfinite_steps", self.max_nonfinite_steps, ">= 1")
        _require(self.max_new_tokens >= 1, "max_new_tokens", self.max_new_tokens, ">= 1")
        _require(self.top_k >= 0, "top_k", self.top_k, ">= 0 (0 turns it off)")
        for name in ("learning_rate", "kl_coef", "clip_eps", "temperature", "top_p", "max_grad_norm"):
            value = getattr(self, name)
            _require(isinstance(value, (int, float)) and math.isfinite(value), name, value, "a finite number")
        _require(self.learning_rate > 0, "learning_rate", self.learning_rate, "> 0")
        _require(self.kl_coef >= 0, "kl_coef", self.kl_coef, ">= 0")
        _require(0 < self.clip_eps < 1, "clip_eps", self.clip_eps, "in (0, 1)")
        _require(self.temperature > 0, "temperature", self.temperature, "> 0")
        _require(0 < self.top_p <= 1, "top_p", self.top_p, "in (0, 1]")
        _require(self.max_grad_norm > 0, "max_grad_norm", self.max_grad_norm, "> 0")


def _require(ok: bool, name: str, value: object, expectation: str) -> None:
    if not ok:
        raise ValueError(f"AeroRLConfig.{name} must be {expectation}, got {value!r}")
