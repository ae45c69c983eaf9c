"""The training tables: ``training_runs``, ``training_steps``, ``training_evals``, ``training_eval_types``,
``training_eval_sources``, ``training_rollouts``. Each is declared once, as the dataclass of one row; its
columns derive from the fields (``storage.columns``). A table whose row type has no ``run_id`` field starts
with a ``run_id`` column: the recorder gives every row of a run its id."""

from __future__ import annotations

from dataclasses import asdict, dataclass, make_dataclass
from datetime import datetime

import pyarrow as pa

from aerorl_ops.config.rewards import REWARD_COMPONENT_NAMES
from aerorl_ops.storage.columns import column, record_columns
from aerorl_ops.storage.schema import TableSpec, required

RUN_ID = required("run_id", pa.string())
"""The first column of each training table whose row type has no ``run_id`` field."""


@dataclass(frozen=True)
class TrainingRunRow:
    """One training run's ``training_runs`` row (``rl.record.rows.TrainingRunRecord`` builds it from the run's
    settings and result); ``finished_at`` is None until the run ends."""

    run_id: str = column(required=True)
    base_model: str
    env: str
    algorithm: str
    quant_bits: int
    reference_quantization_mode: str
    reference_source: str | None
    reference_loaded: bool | None
    final_checkpoint: str | None
    steps: int
    resumed_from_step: int | None
    swap_question_type: str | None
    swap_questions: int | None
    swap_changed: float | None  # the share of answers that change when images are swapped
    config: str = column(pa.json_())  # JSON: the run's TrainingSettings, dataclasses.asdict
    started_at: datetime
    finished_at: datetime | None
    telemetry: str | None = column(pa.json_())  # JSON: TelemetrySummary.as_record() over the whole run
    rejected_rows: int | None = None  # rows the training and held-out environments rejected
    # JSON list: the linear layers a quantized reference kept in full precision (None: not quantized, or not loaded)
    reference_unquantized: str | None = column(pa.json_(), default=None)
    # the most bytes of parameters, gradients and optimizer state one training rank held (its local shards with
    # sharding = "fsdp2"; None when no update ran)
    state_bytes_per_rank: int | None = column(pa.int64(), default=None)


@dataclass(frozen=True)
class StepStats:
    """One training step's statistics, as plain values (its ``training_steps`` row, less the run id)."""

    step: int = column(required=True)
    phase: str  # "warmup" (supervised), "control" (supervised control) or the RL algorithm's name
    loss: float
    reward_mean: float | None  # the environment's reward over the rollout (RL steps)
    reward_std: float | None
    accuracy: float | None  # share of rollout replies the environment marks correct
    kl: float | None  # token-mean KL (the run's kl_kind) of the rollout's policy to the reference (None without one)
    entropy: float | None  # token-mean entropy of the rollout's policy over response tokens
    clip_fraction: float | None  # share of tokens where the PPO ratio clip binds (over every update of the step)
    response_clip_ratio: float | None  # share of replies cut at max_new_tokens
    response_length: float
    masked_token_fraction: float  # counted (completion text) tokens / attended tokens
    vision_token_fraction: float  # vision tokens / attended tokens
    tokens_per_s: float
    step_s: float
    grad_norm: float
    learning_rate: float
    skipped: bool  # the NaN/inf guard skipped this step's update
    peak_memory_mb: float
    curriculum_stage: int | None = None  # 0-based curriculum stage of the step's batch (None = natural mix)
    # training items (supervised) or sampled replies (RL) up to this step
    episodes_seen: int | None = column(pa.int64(), default=None)
    approx_kl: float | None = None  # RL: token-mean of old - new log-prob over every update of the step
    dual_clip_fraction: float | None = None  # RL: share of tokens where the dual clip binds (every update)
    value_loss: float | None = None  # PPO: the clipped value loss (before value_coef), mean over updates
    value_clip_fraction: float | None = None  # PPO: share of tokens where the value clip binds (every update)
    explained_variance: float | None = None  # PPO: 1 - Var(returns - values) / Var(returns) at the rollout
    groups_sampled: int | None = None  # RL: prompt groups sampled over every sampling round (rl.step.rollout_rounds)
    groups_kept: int | None = None  # RL: informative groups trained on (all of them without dynamic sampling)
    groups_dropped: int | None = None  # RL, dynamic sampling: groups whose rewards were all equal, left out
    groups_filled: int | None = None  # RL, dynamic sampling: uninformative groups trained on (rounds ran out)
    sampling_rounds: int | None = None  # RL: rollout rounds of the step
    padded_token_fraction: float | None = None  # padding / all positions of the step's micro-batches
    behaviour_step: int | None = None  # RL: the step after which the weights that sampled its replies were taken
    # RL on a mixture (envs.mixture): JSON {source: {"accuracy": share correct or null, "n": replies}} of the
    # rollout, every part of the mixture listed; None for a run on one dataset
    accuracy_by_source: str | None = column(pa.json_(), default=None)
    # how the step's log-prob and update passes ran (rl.step.token_scoring): "packed (<attention> attention)",
    # "padded: <why the model's check failed>", or "padded"
    scoring_path: str | None = None
    # RL: seconds of the step's rollout (sampling and grading), of scoring it (old and reference log-probs) and of
    # its updates (the device synchronized at each mark); None for a supervised step
    rollout_s: float | None = None
    scoring_s: float | None = None
    update_s: float | None = None
    # RL: how the rollout decoded (generation.decode: "generate", "compiled (static cache)", "generate: <why>")
    decode_path: str | None = None

    def as_record(self) -> dict[str, object]:
        return asdict(self)


TrainingEvalRow = make_dataclass("TrainingEvalRow", [
    ("step", int, column(required=True)),
    ("phase", str | None),
    ("wall_s", float | None),
    ("accuracy", float | None),
    ("accuracy_stderr", float | None),
    ("n", int | None),
    ("reward_mean", float | None),
    *[(f"{name}_mean", float | None) for name in REWARD_COMPONENT_NAMES],
    ("samples", int | None),
    ("distribution", str | None, column(default=None)),
    ("return_stderr", float | None, column(default=None)),
    ("mean_turns", float | None, column(default=None)),
    ("mean_turns_stderr", float | None, column(default=None)),
], frozen=True, namespace={"__module__": __name__, "__doc__": """One held-out evaluation (phases: no_image_prior,
base, warmup, rl, final, control): its ``training_evals`` row less the run id. Greedy accuracy over ``n`` questions
with its binomial standard error, the mean reward, and the mean of each reward component (``<component>_mean``, one
per ``REWARD_COMPONENT_NAMES``, so the row type is made from that list; None where the environment's reward has no
such component). ``distribution``: the ``[datasets]`` name of the held-out distribution evaluated (one the training
dataset's ``held_out`` names), None for the run's own held-out sample. On a multi-turn environment each question is
a whole episode: ``accuracy`` is its success rate, ``reward_mean`` its mean return (``return_stderr``), and
``mean_turns`` the replies per episode (``mean_turns_stderr``); the three are None for a single-turn one."""})


@dataclass(frozen=True)
class TrainingEvalTypeRow:
    """The accuracy of one held-out evaluation on one question type (e.g. easy-VQA yes_no / colour / shape): a
    ``training_eval_types`` row less the run id."""

    step: int = column(required=True)
    phase: str = column(required=True)
    question_type: str = column(required=True)
    accuracy: float | None
    n: int | None
    distribution: str | None = None  # as in training_evals: None for the run's own held-out sample


@dataclass(frozen=True)
class TrainingEvalSourceRow:
    """The accuracy of one held-out evaluation on the items of one source dataset of a mixture (``envs.mixture``:
    a part's ``[datasets.<name>]`` name); a ``training_eval_sources`` row less the run id. A run on one dataset has
    none. ``accuracy`` is None when the evaluated sample holds no item of that source (``n`` = 0)."""

    step: int = column(required=True)
    phase: str = column(required=True)
    source: str = column(required=True)
    accuracy: float | None
    n: int | None
    distribution: str | None = None  # as in training_evals: None for the run's own held-out sample


@dataclass(frozen=True)
class RolloutRow:
    """One sampled reply of an RL step (a share, ``rollout_log_rate``, of each step's replies is kept, so a
    reward curve's rollouts can be read): a ``training_rollouts`` row less the run id."""

    step: int = column(required=True)
    row: int = column(required=True)  # the reply's row in the step's rollout
    prompt_id: str  # the task item's id
    question: str
    image_sha256s: list[str] = column(pa.list_(pa.string()))  # every image's content hash, in the row's order;
    # each image is saved once under its hash (a table made before kept the first image's in image_sha256)
    completion: str  # the reply as decoded (multi-turn: every turn, the environment's too)
    reward: float
    correct: bool
    advantage: float  # mean over the reply's own tokens
    length: int  # completion tokens
    logprob_sum: float  # the rollout policy's log-probability of the reply's own tokens


TRAINING_RUNS = TableSpec("training_runs", pa.schema(record_columns(TrainingRunRow)), ("run_id",),
                          renamed=(("quant_ref_bits", "quant_bits"),))  # AeroRL's name, before the setting kept its own
TRAINING_STEPS = TableSpec("training_steps", pa.schema([RUN_ID, *record_columns(StepStats)]), ("run_id",))
TRAINING_EVALS = TableSpec("training_evals", pa.schema([RUN_ID, *record_columns(TrainingEvalRow)]), ("run_id",))
TRAINING_EVAL_TYPES = TableSpec("training_eval_types", pa.schema([RUN_ID, *record_columns(TrainingEvalTypeRow)]),
                                ("run_id",))
TRAINING_EVAL_SOURCES = TableSpec("training_eval_sources",
                                  pa.schema([RUN_ID, *record_columns(TrainingEvalSourceRow)]), ("run_id",))
TRAINING_ROLLOUTS = TableSpec("training_rollouts", pa.schema([RUN_ID, *record_columns(RolloutRow)]),
                              ("run_id", "step"))

TRAINING_TABLES = (TRAINING_RUNS, TRAINING_STEPS, TRAINING_EVALS, TRAINING_EVAL_TYPES, TRAINING_EVAL_SOURCES,
                   TRAINING_ROLLOUTS)
