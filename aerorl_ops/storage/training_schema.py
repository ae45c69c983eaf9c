"""The training tables: ``training_runs``, ``training_steps``, ``training_evals``, ``training_eval_types``,
``training_rollouts``."""

from __future__ import annotations

import pyarrow as pa

from aerorl_ops.config.rewards import REWARD_COMPONENT_NAMES
from aerorl_ops.storage.schema import TIMESTAMP, TableSpec, required

TRAINING_RUNS = TableSpec(
    "training_runs",
    pa.schema([
        required("run_id", pa.string()),
        ("base_model", pa.string()),
        ("env", pa.string()),
        ("algorithm", pa.string()),
        ("quant_bits", pa.int32()),
        ("reference_quantization_mode", pa.string()),
        ("reference_source", pa.string()),
        ("reference_loaded", pa.bool_()),
        ("final_checkpoint", pa.string()),
        ("steps", pa.int32()),
        ("resumed_from_step", pa.int32()),
        ("swap_question_type", pa.string()),
        ("swap_questions", pa.int32()),
        ("swap_changed", pa.float64()),
        ("config", pa.json_()),
        ("started_at", TIMESTAMP),
        ("finished_at", TIMESTAMP),
        ("telemetry", pa.json_()),
        ("rejected_rows", pa.int32()),
        ("reference_unquantized", pa.json_()),
        ("state_bytes_per_rank", pa.int64()),
    ]),
    ("run_id",),
    renamed=(("quant_ref_bits", "quant_bits"),),  # AeroRL's name, before the setting kept its own
)
"""One training run (``rl.record.rows.TrainingRunRecord``; ``finished_at`` NULL until it ends); ``swap_changed``:
the share of answers that change when images are swapped; ``rejected_rows``: rows its environments rejected;
``reference_unquantized``: the linear layers a quantized reference kept in full precision (a JSON list; NULL when
the reference is not quantized or did not load); ``state_bytes_per_rank``: the most bytes of parameters, gradients and
optimizer state one training rank held (its local shards with ``sharding = "fsdp2"``; NULL when no update ran)."""

TRAINING_STEPS = TableSpec(
    "training_steps",
    pa.schema([
        required("run_id", pa.string()),
        required("step", pa.int32()),
        ("phase", pa.string()),
        *[(name, pa.float64()) for name in (
            "loss", "reward_mean", "reward_std", "accuracy", "kl", "entropy", "clip_fraction", "response_clip_ratio",
            "response_length", "masked_token_fraction", "vision_token_fraction", "tokens_per_s", "step_s",
            "grad_norm", "learning_rate")],
        ("skipped", pa.bool_()),
        ("peak_memory_mb", pa.float64()),
        ("curriculum_stage", pa.int32()),
        ("episodes_seen", pa.int64()),
        *[(name, pa.float64()) for name in (
            "approx_kl", "dual_clip_fraction", "value_loss", "value_clip_fraction", "explained_variance")],
        *[(name, pa.int32()) for name in (
            "groups_sampled", "groups_kept", "groups_dropped", "groups_filled", "sampling_rounds")],
        ("padded_token_fraction", pa.float64()),
        ("behaviour_step", pa.int32()),
    ]),
    ("run_id",),
)
"""One training step: the run id, then the fields of ``aerorl_ops.rl.step.stats.StepStats``."""

TRAINING_EVALS = TableSpec(
    "training_evals",
    pa.schema([
        required("run_id", pa.string()),
        required("step", pa.int32()),
        ("phase", pa.string()),
        ("wall_s", pa.float64()),
        ("accuracy", pa.float64()),
        ("accuracy_stderr", pa.float64()),
        ("n", pa.int32()),
        *[(name, pa.float64()) for name in ("reward_mean", *[f"{c}_mean" for c in REWARD_COMPONENT_NAMES])],
        ("samples", pa.int32()),
    ]),
    ("run_id",),
)
"""One held-out evaluation (phases: no_image_prior, base, warmup, rl, final, control): greedy accuracy
over ``n`` questions with its binomial standard error, and the mean reward (and reward-stack
components, where the environment's reward has them)."""

TRAINING_EVAL_TYPES = TableSpec(
    "training_eval_types",
    pa.schema([
        required("run_id", pa.string()),
        required("step", pa.int32()),
        required("phase", pa.string()),
        required("question_type", pa.string()),
        ("accuracy", pa.float64()),
        ("n", pa.int32()),
    ]),
    ("run_id",),
)
"""The accuracy of one held-out evaluation on one question type (e.g. easy-VQA yes_no / colour / shape)."""

TRAINING_ROLLOUTS = TableSpec(
    "training_rollouts",
    pa.schema([
        required("run_id", pa.string()),
        required("step", pa.int32()),
        required("row", pa.int32()),  # the reply's row in the step's rollout
        ("prompt_id", pa.string()),  # the task item's id
        ("question", pa.string()),
        ("image_sha256", pa.string()),  # the (first) image's content hash; the image is saved once under it
        ("completion", pa.string()),  # the reply as decoded (multi-turn: every turn, the environment's too)
        ("reward", pa.float64()),
        ("correct", pa.bool_()),
        ("advantage", pa.float64()),  # mean over the reply's own tokens
        ("length", pa.int32()),  # completion tokens
        ("logprob_sum", pa.float64()),  # the rollout policy's log-probability of the reply's own tokens
    ]),
    ("run_id", "step"),
)
"""A sampled share (``rollout_log_rate``) of each RL step's replies, so a reward curve's rollouts can be read."""

TRAINING_TABLES = (TRAINING_RUNS, TRAINING_STEPS, TRAINING_EVALS, TRAINING_EVAL_TYPES, TRAINING_ROLLOUTS)
