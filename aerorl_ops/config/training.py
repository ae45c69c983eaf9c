"""Training settings (the ``[training]`` table): what ``aerorl train`` / the ``rl_run`` asset runs.

One ``TrainingSettings`` travels from the file (or the command line, or the ``rl_run`` run config)
to the trainer, the run and the run record. Each setting's own check runs where its value comes in
(``fields.parse_section`` / ``fields.checked``); cross-setting rules (a GRPO group needs at least
two samples, ...) are written once here, as ``*_problem`` functions that
``TrainingSettings.check_rules`` runs once per run, before anything runs. Named sets of overrides
live in ``config.presets``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from aerorl_ops.config.algorithms import (
    ALGORITHM_SETTINGS,
    ALGORITHMS,
    POLICY_LOSSES,
    algorithm_values,
)
from aerorl_ops.config.curriculum import CurriculumStage, parse_curriculum
from aerorl_ops.config.fields import (
    ConfigError,
    boolean,
    fail,
    fraction,
    fraction_below_one,
    integer,
    non_negative_int,
    non_negative_number,
    one_of,
    open_fraction,
    positive_int,
    positive_number,
    probability,
    setting,
    text,
    text_or_empty,
    unset_or,
)
from aerorl_ops.config.training_rules import (
    group_size_problem,
    nodes_problem,
    overlong_problem,
    reference_problem,
    rollout_mode_problem,
    sharding_problem,
    sleep_mode_problem,
)
from aerorl_ops.models.entry import BACKENDS

"""The algorithms whose advantages are relative within a prompt's group of samples."""
KL_KINDS = ("k1", "k2", "k3", "abs", "kl", "mse", "low_var_kl", "k1+", "k3+")
"""Estimators of ``rl.core.functional.kl_penalty`` (kl = k1, mse = k2, low_var_kl = k3; + = k2's gradient)."""
KL_PLACEMENTS = ("loss", "reward")
LOSS_AGG_MODES = ("token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
"""Modes of ``rl.core.functional.aggregate_loss``."""
QUANT_REF_BITS = (4, 8, 16)
REFERENCE_MODES = ("quantized", "lora_base")
"""The KL reference: a quantized copy (``quant_bits``), or the LoRA policy with its adapters disabled."""
LR_SCHEDULES = ("constant", "cosine")
ROLLOUT_MODES = ("sync", "one_step_off")
"""Which weights sample step k's replies: those after step k-1, or after step k-2 (``rl.step.trainer``)."""
SHARDING_MODES = ("none", "fsdp2")
"""How torchrun ranks hold the policy, its gradients and optimizer state (``rl.runtime.sharding``)."""
PACKING_MODES = ("auto", "on", "off")
"""Whether the log-prob and update passes pack each micro-batch's sequences (``rl.step.token_scoring``)."""
MIXED_PRECISIONS = ("auto", "bf16", "off")
"""The log-prob and update passes' autocast: auto = bf16 on CUDA, off elsewhere (``rl.step.token_scoring``)."""
LOGPROB_KERNELS = ("aerorl", "liger")
"""The LM-head log-prob kernel: ours (``losses.token_logprobs``) or Liger Kernel's (``losses.liger_logprobs``)."""


_text_or_empty = text_or_empty("empty to turn it off")


def _above_one(where: str, name: str, value: object) -> float:
    result = positive_number(where, name, value)
    if result <= 1:
        raise fail(where, name, f"must be > 1, got {value!r}")
    return result


def _curriculum(where: str, name: str, value: object) -> str:
    """A curriculum spec that parses (``config.curriculum``); empty = none."""
    if not isinstance(value, str):
        raise fail(where, name, f"must be a string such as '500: colour,shape @ 0.75', got {value!r}")
    try:
        parse_curriculum(value)
    except ValueError as error:
        raise fail(where, name, f"is not a curriculum: {error}") from None
    return value


@dataclass(frozen=True)
class TrainingSettings:
    """A supervised warm-up, then RL against a frozen quantized reference (see ``rl.run.phases``)."""

    base_model: str = setting("tiny-qwen2-vl", help="model key from the config's [models], or a checkpoint directory",
                              check=text)
    env: str = setting("easy_vqa", help="training environment: a registry kind (easy_vqa, docvqa, chartqa, ...) "
                       "or else a [datasets.<name>] table of the config file (its kind, path and settings)",
                       check=text)
    eval_env: str = setting("", help="held-out environment, named like env (empty = env); a configured dataset "
                            "brings its own split", check=_text_or_empty)
    train_split: str = setting("train", help="environment split the policy trains on", check=text)
    train_limit: int = setting(0, help="training items drawn from the split (0 = all; synthetic docvqa needs > 0)",
                               check=non_negative_int)
    eval_split: str = setting("test", help="environment split of the held-out sample", check=text)
    eval_size: int = setting(500, help="held-out questions: a fixed sample (seed 0) of the eval split",
                             check=positive_int)
    algorithm: str = setting("grpo", help="grpo, dr_grpo, rloo, reinforce_pp, ppo (with a value head), dapo or gspo "
                             "(grpo's advantages with DAPO's or GSPO's settings); settings left unset take the "
                             "algorithm's defaults (aerorl_ops.config.algorithms)",
                             check=one_of(*ALGORITHMS))
    steps: int = setting(60, help="RL steps after the warm-up", check=non_negative_int)
    warmup_steps: int = setting(30, help="supervised warm-up steps (stop at partial accuracy)",
                                check=non_negative_int)
    warmup_batch_size: int = setting(32, help="questions per supervised step", check=positive_int)
    warmup_learning_rate: float = setting(1e-3, help="supervised (warm-up and control) learning rate",
                                          check=positive_number)
    group_size: int = setting(8, help="samples per prompt", check=positive_int)
    prompts_per_step: int = setting(16, help="prompts per RL step", check=positive_int)
    learning_rate: float = setting(1e-3, help="RL learning rate", check=positive_number)
    lr_schedule: str = setting("constant", help="RL phase: constant, or cosine (to lr_min_ratio x the rate) after "
                               "lr_warmup_steps of linear warm-up", check=one_of(*LR_SCHEDULES))
    lr_warmup_steps: int = setting(0, help="RL phase: linear learning-rate warm-up steps of the cosine schedule",
                                   check=non_negative_int)
    warmup_lr_schedule: str = setting("constant", help="supervised warm-up phase: constant, or cosine after "
                                      "warmup_lr_warmup_steps of linear warm-up", check=one_of(*LR_SCHEDULES))
    warmup_lr_warmup_steps: int = setting(0, help="supervised warm-up phase: linear learning-rate warm-up steps",
                                          check=non_negative_int)
    lr_min_ratio: float = setting(0.0, help="cosine schedules end at this fraction of their phase's learning rate",
                                  check=fraction)
    grad_accumulation: int = setting(1, help="micro-batches per optimizer update (same gradient, less memory)",
                                     check=positive_int)
    rollout_log_rate: float = setting(0.05, help="RL: share of each step's replies stored in training_rollouts "
                                      "(question, image hash, completion, reward, advantage, log-prob; the images "
                                      "once each under reports/rollout_images); 0 = none", check=fraction)
    micro_batch_tokens: int = setting(0, help="RL: cut each rank's rows of an update into micro-batches of at most "
                                      "this many padded tokens (rows x longest row), similar lengths together, for "
                                      "the scoring and update passes (verl's dynamic batch size; the gradient is "
                                      "the same); 0 = grad_accumulation micro-batches by row count",
                                      check=non_negative_int)
    packed_sequences: str = setting("auto", help="the log-prob and update passes (rollout scoring, reference, "
                                     "updates, warm-up) on packed sequences: each micro-batch's rows as one row of "
                                     "their real tokens, no padding computed (verl's remove padding; on CUDA the "
                                     "text attention runs FlashAttention's variable-length kernel). auto: where the "
                                     "model's first scored micro-batch gives the padded log-probs packed (checked "
                                     "once per model; otherwise padded, and logged); on: packed, or fail; off: "
                                     "padded", check=one_of(*PACKING_MODES))
    mixed_precision: str = setting("auto", help="the log-prob and update passes' forward under torch.autocast: bf16 "
                                   "(bfloat16 compute, the parameters and their gradients in the model's dtype, fp32 "
                                   "master weights for a float32 model; log-probs in float32) or off; auto: bf16 on "
                                   "CUDA, off elsewhere", check=one_of(*MIXED_PRECISIONS))
    logprob_kernel: str = setting("aerorl", help="the LM head's per-token log-prob and entropy kernel: aerorl (our "
                                  "chunked fused path) or liger (Liger Kernel's fused linear scaled cross-entropy: "
                                  "needs liger-kernel >= 0.8.5, Triton and CUDA; not a dependency)",
                                  check=one_of(*LOGPROB_KERNELS))
    max_nonfinite_steps: int = setting(3, help="NaN/inf guard: stop after this many skipped updates in a row",
                                       check=positive_int)
    kl_coef: float | None = setting(None, help="KL coefficient to the reference (0 = no reference is loaded); "
                                    "unset: the algorithm's (0 for dapo and gspo, 0.04 otherwise)",
                                    check=unset_or(non_negative_number))
    kl_kind: str | None = setting(None, help="KL estimator: k1, k2, k3, abs (kl, mse, low_var_kl are k1, k2, k3; "
                                  "k1+, k3+ take k2's gradient); unset: k3 as a loss term, k1 in the reward",
                                  check=unset_or(one_of(*KL_KINDS)))
    kl_placement: str | None = setting(None, help="loss (+kl_coef x KL, aggregated like the loss) or reward "
                                       "(-kl_coef x KL at each token); unset: the algorithm's (reward for "
                                       "reinforce_pp and ppo, loss for the grpo family)",
                                       check=unset_or(one_of(*KL_PLACEMENTS)))
    loss_agg_mode: str | None = setting(None, help="how per-token losses (policy, KL, entropy, value) become one: "
                                        "token-mean, token-sum, seq-mean-token-sum, seq-mean-token-mean or "
                                        "seq-mean-token-sum-norm (the sapo and gmpo policy losses keep their own); "
                                        "unset: the algorithm's (seq-mean-token-mean for gspo, token-mean otherwise)",
                                        check=unset_or(one_of(*LOSS_AGG_MODES)))
    policy_loss: str | None = setting(None, help="ppo (clipped surrogate with dual clip), gspo (sequence ratio), "
                                      "gmpo (geometric mean of token ratios), sapo (soft gate, tau_pos/tau_neg) or "
                                      "cispo (clipped, stopped ratio x log-prob); unset: the algorithm's (gspo for "
                                      "gspo, ppo otherwise)", check=unset_or(one_of(*POLICY_LOSSES)))
    ppo_epochs: int | None = setting(None, help="passes over each rollout; unset: the algorithm's (4 for ppo, "
                                     "1 otherwise)", check=unset_or(positive_int))
    ppo_mini_batches: int = setting(1, help="optimizer updates per pass: the rollout in this many minibatches, "
                                    "each of grad_accumulation micro-batches", check=positive_int)
    clip_low: float | None = setting(None, help="ratio clip: the ratio is clipped below at 1 - clip_low (gmpo: the "
                                     "log-ratio at -clip_low); unset: the algorithm's (3e-4 for gspo, 0.2 otherwise)",
                                     check=unset_or(open_fraction))
    clip_high: float | None = setting(None, help="ratio clip: the ratio is clipped above at 1 + clip_high (gmpo: "
                                      "the log-ratio at clip_high); unset: the algorithm's (0.28 for dapo, 4e-4 for "
                                      "gspo, 0.2 otherwise)", check=unset_or(open_fraction))
    tau_pos: float = setting(1.0, help="sapo: gate temperature of positive-advantage tokens", check=positive_number)
    tau_neg: float = setting(1.05, help="sapo: gate temperature of negative-advantage tokens",
                             check=positive_number)
    dual_clip_c: float = setting(3.0, help="dual clip: a negative-advantage token's loss is at most "
                                 "-advantage x dual_clip_c (> 1)", check=_above_one)
    entropy_coef: float | None = setting(None, help="entropy bonus: -entropy_coef x the policy's aggregated entropy; "
                                         "unset: the algorithm's (0.01 for ppo, 0 otherwise)",
                                         check=unset_or(non_negative_number))
    gamma: float | None = setting(None, help="discount of per-token returns (reinforce_pp, ppo); unset: the "
                                  "algorithm's (0.99 for ppo, 1 otherwise)", check=unset_or(fraction))
    gae_lambda: float = setting(0.95, help="ppo: GAE lambda", check=fraction)
    value_coef: float = setting(0.5, help="ppo: weight of the clipped value loss", check=non_negative_number)
    value_clip: float = setting(0.5, help="ppo: the clipped value loss keeps predictions within this of the "
                                "rollout's values", check=positive_number)
    quant_bits: int = setting(8, help="reference precision: 4 (nf4), 8 (int8) or 16",
                              check=one_of(*QUANT_REF_BITS, described="4 (nf4), 8 (int8) or 16"))
    reference: str = setting("quantized", help="KL reference: quantized (a separate copy at quant_bits) or "
                             "lora_base (needs lora_rank > 0: the policy with its adapters disabled, no second "
                             "copy; the warm-up adapter is merged at the RL start and fresh adapters attached)",
                             check=one_of(*REFERENCE_MODES))
    freeze_vision_tower: bool = setting(False, help="no gradients and no optimizer state for the vision encoder "
                                        "only, in every family (Qwen's visual without its merger); the projector "
                                        "trains unless freeze_projector (aerorl_ops.models.family_parts; with LoRA "
                                        "the whole base model is frozen anyway)", check=boolean)
    freeze_projector: bool = setting(False, help="no gradients and no optimizer state for the projector from "
                                     "vision features to the language model (Qwen's merger, Idefics3's connector, "
                                     "multi_modal_projector)", check=boolean)
    lora_rank: int = setting(0, help="LoRA rank (peft; 0 = full fine-tuning); the vision encoder, the projector "
                             "and the LM head are never adapted", check=non_negative_int)
    lora_alpha: int = setting(16, help="LoRA alpha: the update is scaled by lora_alpha / lora_rank (verl's 16)",
                              check=positive_int)
    lora_target_modules: str = setting("all-linear", help="LoRA targets: all-linear, or comma-separated module "
                                       "names (e.g. q_proj,v_proj)", check=text)
    lora_dropout: float = setting(0.0, help="dropout on the LoRA branch's input", check=fraction_below_one)
    temperature: float = setting(1.0, help="rollout sampling temperature", check=positive_number)
    top_p: float = setting(1.0, help="rollout nucleus sampling (1 = off)", check=probability)
    top_k: int = setting(0, help="rollout top-k sampling (0 = off)", check=non_negative_int)
    rollout_backend: str = setting("hf", help="what samples the RL rollouts: hf (the policy's own generate) or "
                                   "vllm (a vLLM engine in the training process, the policy's weights loaded into "
                                   "it before every RL step; engine settings from the base model's [models.<key>] "
                                   "table when it is a vLLM entry). Log-probs are always the policy's own, "
                                   "recomputed; evaluations stay greedy with hf. vllm needs vLLM installed; on "
                                   "several ranks each rank samples its share of the prompts with an engine of its "
                                   "own (on a GPU, on the rank's device)", check=one_of(*BACKENDS))
    vllm_sleep_mode: bool = setting(False, help="rollout_backend = vllm on GPUs: put the engine to sleep from the end "
                                    "of each rollout until the next weight sync (vLLM's sleep mode, level 1: its KV "
                                    "cache freed and its weights in host memory during the update); CUDA only",
                                    check=boolean)
    rollout_mode: str = setting("sync", help="sync (step k samples with the weights after step k-1) or one_step_off "
                                "(step k's update uses replies sampled with the weights after step k-2, a frozen "
                                "copy of the policy, sampled in a worker thread during step k-1's update); "
                                "training_steps.behaviour_step records which weights sampled each step",
                                check=one_of(*ROLLOUT_MODES))
    rollout_is: bool = setting(True, help="one_step_off: the PPO ratio is to the step's own start (log-probs "
                               "recomputed) and each token's policy loss is weighted by the truncated importance "
                               "weight min(pi_old / pi_behaviour, rollout_is_cap) (verl's rollout_is, TIS); false: "
                               "the ratio is to the behaviour weights' log-probs, unweighted", check=boolean)
    rollout_is_cap: float = setting(2.0, help="one_step_off with rollout_is: the importance weight's upper bound "
                                    "(verl's 2.0)", check=positive_number)
    max_new_tokens: int = setting(4, help="maximum response length, in rollouts and held-out answers",
                                  check=positive_int)
    dynamic_sampling: bool | None = setting(None, help="DAPO's dynamic sampling: drop groups whose rewards are all "
                                            "equal and sample more prompts until prompts_per_step groups are "
                                            "informative; unset: the algorithm's (on for dapo)",
                                            check=unset_or(boolean))
    max_sampling_rounds: int = setting(10, help="dynamic sampling: rollout rounds per step at most (DAPO's recipe: "
                                       "10); when they run out, the step goes ahead with what it has and says so",
                                       check=positive_int)
    overlong_buffer: int | None = setting(None, help="DAPO's soft overlong punishment: replies longer than "
                                          "max_new_tokens - overlong_buffer tokens lose up to "
                                          "overlong_penalty_factor of reward, linearly (0 = off); unset: the "
                                          "algorithm's (dapo: a fifth of max_new_tokens, at least 1; else 0)",
                                          check=unset_or(non_negative_int))
    overlong_penalty_factor: float = setting(1.0, help="the overlong penalty at max_new_tokens",
                                             check=non_negative_number)
    mask_truncated: bool = setting(False, help="DAPO's overlong filtering: replies cut at max_new_tokens are left "
                                   "out of the loss (they still count in their group's advantages)",
                                   check=boolean)
    curriculum: str = setting("", help="curriculum stages 'UNTIL_STEP: types @ share; ...' (e.g. "
                              "'500: colour,shape @ 0.75'): batches favour those question types until that global "
                              "step; empty = the natural mix (grammar: aerorl_ops.config.curriculum)",
                              check=_curriculum)
    control: bool = setting(True, help="also train supervised from the warm-up checkpoint for the RL phase's wall "
                            "time, and evaluate it (phase control)", check=boolean)
    swap_check_type: str = setting("colour", help="question type of the final image-swap check (empty = skip)",
                                   check=_text_or_empty)
    seed: int = setting(0, help="seed of data order, sampling and the training items", check=integer)
    eval_interval: int = setting(15, help="evaluate the held-out sample every N global steps (warm-up and RL)",
                                 check=positive_int)
    sampled_eval_size: int = setting(64, help="MAYE's evaluation during training: this many questions scored at the "
                                     "[eval] sampling settings (pass@k at temperature 1, pass@1 at 0.6, near-greedy) "
                                     "with response length and reflection metrics, on validation_split every "
                                     "eval interval and on the held-out sample at the end (0 = off)",
                                     check=non_negative_int)
    validation_split: str = setting("validation", help="split of a registry env scored by the sampled evaluations "
                                    "during training (a configured dataset uses its held-out set)", check=text)
    checkpoint_interval: int = setting(50, help="checkpoint every N steps", check=positive_int)
    nproc_per_node: int = setting(1, help="training processes: 1 = in the Dagster step itself; N > 1 = N torchrun "
                                  "data-parallel ranks launched through Dagster Pipes (gloo on CPU, NCCL with one GPU "
                                  "per rank), each owning grad_accumulation / N micro-batches of every update, so "
                                  "grad_accumulation must be a multiple of N; rank 0 evaluates and writes reports",
                                  check=positive_int)
    dist_timeout_s: int = setting(1800, help="nproc_per_node > 1: seconds a rank waits at a collective before the "
                                  "run fails; it must exceed rank 0's longest evaluation (the others wait meanwhile)",
                                  check=positive_int)
    sharding: str = setting("none", help="nproc_per_node > 1: none (every rank holds the whole policy, its gradients "
                            "and AdamW state) or fsdp2 (each rank holds 1/N of them: torch's fully_shard on every "
                            "decoder layer and vision block, then the root; on a GPU bf16 compute with fp32 gradient "
                            "reduction, on CPU fp32; checkpoints are a gathered Hugging Face folder plus "
                            "torch.distributed.checkpoint optimizer shards, resumable on any number of ranks). The "
                            "same global batch trains the same policy either way; one process holds everything",
                            check=one_of(*SHARDING_MODES))
    cpu_offload: bool = setting(False, help="sharding = fsdp2 on GPUs: keep the parameter shards, gradients and AdamW "
                                "state in host memory (FSDP2's CPUOffloadPolicy: less GPU memory, slower updates); "
                                "on CPU ranks they are there already", check=boolean)
    gradient_checkpointing: bool = setting(False, help="recompute each decoder layer's and vision block's activations "
                                           "in the backward instead of keeping them (less activation memory, about "
                                           "a third more compute, the same gradient)", check=boolean)
    nnodes: int = setting(1, help="torchrun nodes of nproc_per_node ranks each (nnodes x nproc_per_node ranks in all): "
                          "[training_launch] launcher = local starts one torchrun agent per node on this machine "
                          "(a c10d rendezvous on localhost), k8s one pod per node; grad_accumulation must be a "
                          "multiple of the ranks in all", check=positive_int)

    def check_rules(self, where: str) -> TrainingSettings:
        """These settings, unless a rule across settings is broken: then a ``ConfigError`` naming
        ``where`` (the file, or the command line) and the rule."""
        problems = (group_size_problem(self.algorithm, self.group_size),
                    overlong_problem(self.overlong_buffer, self.max_new_tokens),
                    reference_problem(self.reference, self.lora_rank),
                    sleep_mode_problem(self.vllm_sleep_mode, self.rollout_backend),
                    rollout_mode_problem(self.rollout_mode, self.rollout_backend, self.nproc_per_node,
                                         self.rollout_is, self.algorithm, self.policy_loss),
                    sharding_problem(self.sharding, self.cpu_offload, self.micro_batch_tokens, self.world_size),
                    nodes_problem(self.nnodes, self.rollout_mode))
        problem = next((p for p in problems if p), None)
        if problem is not None:
            raise ConfigError(f"{where}: {problem}")
        return self

    def resolve(self) -> Recipe:
        """What a run of these settings trains with: every setting of ``ALGORITHM_SETTINGS`` left unset (None)
        filled in from the algorithm's defaults (``config.algorithms``). Called once per run, where its
        settings come in (``rl.run.train_and_record``, ``rl.run.phases.run_training``, AeroRL's facade);
        the library below takes the ``Recipe``.

        >>> TrainingSettings(algorithm="dapo", max_new_tokens=10).resolve().overlong_buffer
        2
        """
        chosen = {f.name: getattr(self, f.name) for f in fields(TrainingSettings)}
        return Recipe(**{**chosen, **algorithm_values(self.algorithm, chosen, self.max_new_tokens)})

    @property
    def world_size(self) -> int:
        """Training ranks in all: ``nproc_per_node`` on each of ``nnodes`` nodes (1: in the Dagster step)."""
        return self.nnodes * self.nproc_per_node

    @property
    def total_steps(self) -> int:
        """Global steps of the run: the warm-up's, then RL's."""
        return self.warmup_steps + self.steps

    @property
    def curriculum_stages(self) -> tuple[CurriculumStage, ...]:
        return parse_curriculum(self.curriculum)

    def episodes_after(self, steps: int) -> int:
        """Training episodes seen after ``steps`` global steps: items of the supervised batches, then
        sampled replies (prompts x group size) of the RL steps."""
        warmup = min(steps, self.warmup_steps)
        return warmup * self.warmup_batch_size + (steps - warmup) * self.prompts_per_step * self.group_size


@dataclass(frozen=True, kw_only=True)
class Recipe(TrainingSettings):
    """``TrainingSettings`` with every algorithm-defaulted setting filled in (``ALGORITHM_SETTINGS``, none
    None): what a run trains with, made once by :meth:`TrainingSettings.resolve`. Its fields are the
    settings', in their order, so ``dataclasses.asdict`` of it is the run's recorded config."""

    kl_coef: float
    kl_kind: str
    kl_placement: str
    loss_agg_mode: str
    policy_loss: str
    ppo_epochs: int
    clip_low: float
    clip_high: float
    entropy_coef: float
    gamma: float
    dynamic_sampling: bool
    overlong_buffer: int

    def __post_init__(self) -> None:
        unset = [name for name in ALGORITHM_SETTINGS if getattr(self, name) is None]
        if unset:
            raise ValueError(f"a Recipe has every algorithm setting filled in, but {', '.join(unset)} "
                             f"{'is' if len(unset) == 1 else 'are'} None: make it with TrainingSettings.resolve()")


def require_recipe(settings: TrainingSettings, taker: str) -> Recipe:
    """``settings`` when they are a ``Recipe``; else a TypeError naming ``taker`` and what to pass instead."""
    if not isinstance(settings, Recipe):
        raise TypeError(f"{taker} takes a Recipe, the settings resolved once for their algorithm, got "
                        f"{type(settings).__name__}: pass settings.resolve()")
    return settings


LAUNCH_SETTINGS = ("nproc_per_node", "dist_timeout_s", "rollout_log_rate", "sharding", "cpu_offload",
                   "gradient_checkpointing", "nnodes", "vllm_sleep_mode", "packed_sequences", "logprob_kernel")
"""How a run is launched and recorded, not what it trains (the same global batch trains the same policy on
any number of ranks, sharded or not, with activations kept or recomputed, the rollout engine asleep during the
updates or not, its sequences packed or padded, its log-probs by either kernel, whatever share of its replies is
stored): left out of the run id, so a run resumes whatever its launch."""


TRAINING_DEFAULTS = TrainingSettings()
"""The defaults as one value, for code whose own defaults read from here (AeroRL's facade)."""
