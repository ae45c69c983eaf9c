"""``AeroRLConfig``: AeroRL's config fields plus the RL algorithm and its hyperparameters."""

from __future__ import annotations

import math
from dataclasses import dataclass

from aerorl_ops.aerorl_compat import TRAINER_BACKENDS
from aerorl_ops.config.fields import ConfigError
from aerorl_ops.config.training import (
    ALGORITHMS,
    KL_KINDS,
    KL_PLACEMENTS,
    LOSS_AGG_MODES,
    QUANT_REF_BITS,
    REFERENCE_MODES,
    group_size_problem,
    reference_problem,
    rollout_ranks_problem,
)
from aerorl_ops.config.training import TRAINING_DEFAULTS as DEFAULTS
from aerorl_ops.models.entry import BACKENDS

ALGORITHM_FIELDS = ("kl_kind", "kl_placement", "loss_agg_mode", "ppo_epochs", "ppo_mini_batches", "clip_low",
                    "clip_high", "dual_clip_c", "entropy_coef", "gamma", "gae_lambda", "value_coef", "value_clip")
"""The fields that are the training settings of the same name, passed through unchanged."""
MODEL_FIELDS = ("reference", "freeze_vision_tower", "lora_rank", "lora_alpha", "lora_target_modules", "lora_dropout")
"""What trains and what the KL is measured to (``rl.lora``, ``rl.vision_tower``); same-named settings."""


@dataclass(slots=True)
class AeroRLConfig:
    """What to train and how.

    AeroRL's fields: ``zero_copy_kv`` (descriptive), ``mask_vision_tokens``, ``quant_ref_bits``
    (4 = bitsandbytes nf4, 8 = bitsandbytes int8, 16 = unquantized), ``trainer_backend``
    (``auto`` and ``torch`` run this project's own trainer; ``trl``/``verl`` are accepted for
    compatibility and reported, but training always runs here).

    RL fields: ``algorithm`` (``grpo``, ``dr_grpo``, ``rloo``, ``reinforce_pp`` or ``ppo``), ``group_size``
    samples per prompt, ``learning_rate``, ``kl_coef`` (KL to the reference; 0 = no reference),
    sampling (``temperature``, ``top_k`` 0 = off, ``top_p`` 1 = off), ``rollout_backend`` (``hf``: the
    policy's ``generate``; ``vllm``: a vLLM engine synced to the policy before every RL step, one
    training process only), ``max_new_tokens`` (the maximum response length), ``max_grad_norm``,
    ``grad_accumulation`` (micro-batches per update), ``max_nonfinite_steps`` (NaN/inf guard),
    ``seed``; and ``ALGORITHM_FIELDS``, the loss's settings
    (see their help in ``TrainingSettings``). Those that may be None (unset) take the algorithm's
    defaults (``rl.algorithms.AlgorithmSettings``).

    Model fields (``MODEL_FIELDS``): ``freeze_vision_tower``; ``lora_rank`` (0 = full fine-tuning),
    ``lora_alpha``, ``lora_target_modules``, ``lora_dropout`` (``rl.lora``); ``reference``:
    ``quantized`` (a copy at ``quant_ref_bits``) or ``lora_base`` (the LoRA policy, adapters disabled).

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
    temperature: float = DEFAULTS.temperature
    top_k: int = DEFAULTS.top_k
    top_p: float = DEFAULTS.top_p
    rollout_backend: str = DEFAULTS.rollout_backend
    max_new_tokens: int = DEFAULTS.max_new_tokens
    max_grad_norm: float = 1.0
    grad_accumulation: int = DEFAULTS.grad_accumulation
    max_nonfinite_steps: int = DEFAULTS.max_nonfinite_steps
    seed: int = DEFAULTS.seed
    kl_kind: str | None = DEFAULTS.kl_kind
    kl_placement: str | None = DEFAULTS.kl_placement
    loss_agg_mode: str = DEFAULTS.loss_agg_mode
    ppo_epochs: int | None = DEFAULTS.ppo_epochs
    ppo_mini_batches: int = DEFAULTS.ppo_mini_batches
    clip_low: float = DEFAULTS.clip_low
    clip_high: float = DEFAULTS.clip_high
    dual_clip_c: float = DEFAULTS.dual_clip_c
    entropy_coef: float | None = DEFAULTS.entropy_coef
    gamma: float | None = DEFAULTS.gamma
    gae_lambda: float = DEFAULTS.gae_lambda
    value_coef: float = DEFAULTS.value_coef
    value_clip: float = DEFAULTS.value_clip
    reference: str = DEFAULTS.reference
    freeze_vision_tower: bool = DEFAULTS.freeze_vision_tower
    lora_rank: int = DEFAULTS.lora_rank
    lora_alpha: int = DEFAULTS.lora_alpha
    lora_target_modules: str = DEFAULTS.lora_target_modules
    lora_dropout: float = DEFAULTS.lora_dropout

    def validate(self) -> None:
        """Raise ``ConfigError`` (a ``ValueError``) naming the first invalid field; the rules across
        fields are ``config.training``'s, the same the settings file and the command line are held to."""
        if self.quant_ref_bits not in QUANT_REF_BITS:
            raise ConfigError(f"quant_ref_bits must be one of {{4, 8, 16}}, got {self.quant_ref_bits!r}")
        if self.trainer_backend not in TRAINER_BACKENDS:
            raise ConfigError(f"trainer_backend must be one of {TRAINER_BACKENDS}, got {self.trainer_backend!r}")
        if self.algorithm not in ALGORITHMS:
            raise ConfigError(f"algorithm must be one of {ALGORITHMS}, got {self.algorithm!r}")
        _require_rule(group_size_problem(self.algorithm, self.group_size))
        _require(self.grad_accumulation >= 1, "grad_accumulation", self.grad_accumulation, ">= 1")
        _require(self.max_nonfinite_steps >= 1, "max_nonfinite_steps", self.max_nonfinite_steps, ">= 1")
        _require(self.max_new_tokens >= 1, "max_new_tokens", self.max_new_tokens, ">= 1")
        _require(self.top_k >= 0, "top_k", self.top_k, ">= 0 (0 turns it off)")
        _require(self.rollout_backend in BACKENDS, "rollout_backend", self.rollout_backend, f"one of {BACKENDS}")
        for name in ("learning_rate", "kl_coef", "temperature", "top_p", "max_grad_norm"):
            value = getattr(self, name)
            _require(isinstance(value, (int, float)) and math.isfinite(value), name, value, "a finite number")
        _require(self.learning_rate > 0, "learning_rate", self.learning_rate, "> 0")
        _require(self.kl_coef >= 0, "kl_coef", self.kl_coef, ">= 0")
        _require(self.temperature > 0, "temperature", self.temperature, "> 0")
        _require(0 < self.top_p <= 1, "top_p", self.top_p, "in (0, 1]")
        _require(self.max_grad_norm > 0, "max_grad_norm", self.max_grad_norm, "> 0")
        self._validate_loss_settings()
        self._validate_model_settings()

    def _validate_loss_settings(self) -> None:
        """The ``ALGORITHM_FIELDS``; None (unset) is valid where the algorithm supplies a default."""
        _require(self.kl_kind is None or self.kl_kind in KL_KINDS, "kl_kind", self.kl_kind,
                 f"unset (None) or one of {KL_KINDS}")
        _require(self.kl_placement is None or self.kl_placement in KL_PLACEMENTS, "kl_placement", self.kl_placement,
                 f"unset (None) or one of {KL_PLACEMENTS}")
        _require(self.loss_agg_mode in LOSS_AGG_MODES, "loss_agg_mode", self.loss_agg_mode, f"one of {LOSS_AGG_MODES}")
        _require(self.ppo_epochs is None or self.ppo_epochs >= 1, "ppo_epochs", self.ppo_epochs, "unset (None) or >= 1")
        _require(self.ppo_mini_batches >= 1, "ppo_mini_batches", self.ppo_mini_batches, ">= 1")
        optional = [name for name in ("entropy_coef", "gamma") if getattr(self, name) is not None]
        for name in ("clip_low", "clip_high", "dual_clip_c", "gae_lambda", "value_coef", "value_clip", *optional):
            value = getattr(self, name)
            _require(isinstance(value, (int, float)) and math.isfinite(value), name, value, "a finite number")
        _require(0 < self.clip_low < 1, "clip_low", self.clip_low, "in (0, 1)")
        _require(0 < self.clip_high < 1, "clip_high", self.clip_high, "in (0, 1)")
        _require(self.dual_clip_c > 1, "dual_clip_c", self.dual_clip_c, "> 1")
        _require(self.entropy_coef is None or self.entropy_coef >= 0, "entropy_coef", self.entropy_coef,
                 "unset (None) or >= 0")
        _require(self.gamma is None or 0 <= self.gamma <= 1, "gamma", self.gamma, "unset (None) or in [0, 1]")
        _require(0 <= self.gae_lambda <= 1, "gae_lambda", self.gae_lambda, "in [0, 1]")
        _require(self.value_coef >= 0, "value_coef", self.value_coef, ">= 0")
        _require(self.value_clip > 0, "value_clip", self.value_clip, "> 0")

    def _validate_model_settings(self) -> None:
        """The ``MODEL_FIELDS``: LoRA's shape, and a ``lora_base`` reference only with LoRA."""
        _require(isinstance(self.lora_rank, int) and self.lora_rank >= 0, "lora_rank", self.lora_rank,
                 "an integer >= 0 (0 turns LoRA off)")
        _require(isinstance(self.lora_alpha, (int, float)) and self.lora_alpha > 0, "lora_alpha", self.lora_alpha,
                 "> 0")
        _require(isinstance(self.lora_dropout, (int, float)) and 0 <= self.lora_dropout < 1, "lora_dropout",
                 self.lora_dropout, "in [0, 1)")
        _require(isinstance(self.lora_target_modules, str) and bool(self.lora_target_modules.strip()),
                 "lora_target_modules", self.lora_target_modules, "'all-linear' or comma-separated module names")
        _require(self.reference in REFERENCE_MODES, "reference", self.reference, f"one of {REFERENCE_MODES}")
        _require_rule(reference_problem(self.reference, self.lora_rank))


def check_rollout_ranks(rollout_backend: str, ranks: int) -> None:
    """``ConfigError`` unless ``ranks`` training processes can sample with ``rollout_backend``
    (``config.training.rollout_ranks_problem``)."""
    _require_rule(rollout_ranks_problem(rollout_backend, ranks), prefix="")


def _require(ok: bool, name: str, value: object, expectation: str) -> None:
    if not ok:
        raise ConfigError(f"AeroRLConfig.{name} must be {expectation}, got {value!r}")


def _require_rule(problem: str | None, prefix: str = "AeroRLConfig.") -> None:
    if problem is not None:
        raise ConfigError(f"{prefix}{problem}")
