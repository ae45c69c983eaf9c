"""A whole training run on a task environment: supervised warm-up, then RL, then a control.

Algorithm:
1. score the no-image prior (fitted on the training items) and the base policy on the fixed
   held-out sample (phases ``no_image_prior`` and ``base``);
2. ``warmup_steps`` of masked NLL on each item's plain answer + EOS (vision and prompt tokens
   excluded), batches drawn by the curriculum stages (``curriculum``; global steps); it
   should stop at partial accuracy, so that RL has something to add (phase ``warmup``);
3. save the warm-up checkpoint; the frozen reference is loaded from it, quantized as configured
   (nf4 / int8 / none), or, with ``reference = lora_base``, it is the policy's own base after the
   warm-up adapter is merged (adapters disabled) — KL is measured to the policy RL started from.
   With ``kl_coef = 0`` no reference is loaded;
4. ``steps`` of the configured algorithm, reward = the environment's reward (rollouts sampled by
   the policy, or by a vLLM engine synced to it: ``rollout_backend``, shut down after the last RL
   step), then the evaluation at the end (``final``) and the image-swap check. Every
   ``eval_interval`` global steps the held-out sample is evaluated in either phase (``warmup`` / ``rl``);
5. the **control**: supervised training from the warm-up checkpoint (its optimizer state too,
   at the warm-up's last learning rate) for the RL phase's training seconds, evaluated at the end
   (``control``). What RL adds is then read against what the same time of supervised training adds;
6. checkpoints every ``checkpoint_interval`` steps (written crash-safe, ``rl.checkpoint``); a rerun resumes
   from the newest complete one (``on_resume`` is told which, and which torn ones it skipped);
7. with ``sampled_eval_size > 0``, MAYE's evaluation (``eval_runner.runner.evaluate_model``: pass@k and
   pass@1 at the ``[eval]`` sampling settings, response length, clip ratio, reflection) of that many
   ``validation_env`` items beside every held-out evaluation of the warm-up and RL phases, and of
   the held-out items at the end (``TrainingResult.sampled``).

Steps are numbered globally (warm-up steps first). Evaluations use greedy decoding; their
``wall_s`` is training seconds (evaluations excluded).

With several data-parallel ranks (``dp``, ``rl.distributed``) every rank trains (the trainer
shards each step's micro-batches), and rank 0 alone evaluates, checkpoints, runs the image-swap
check and the control, and calls the callbacks; the other ranks skip those and meet rank 0 at the
next collective. They wait at a barrier only for the warm-up checkpoint, which the reference loads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from aerorl_ops.config.evaluation import EvalSettings
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.eval_runner.held_out import EvalResult, SwapCheck, evaluate_policy, image_swap_check, prior_evaluation
from aerorl_ops.eval_runner.runner import EvalOutcome, evaluate_model
from aerorl_ops.models.entry import GenerationBackend
from aerorl_ops.rl.checkpoint import (
    ResumePoint,
    load_checkpoint_state,
    newest_complete_checkpoint,
    save_checkpoint,
    step_dir,
)
from aerorl_ops.rl.distributed import SINGLE, DataParallel
from aerorl_ops.rl.runtimes import policy_and_reference
from aerorl_ops.rl.schedule import ItemSampler, learning_rate_at
from aerorl_ops.rl.stats import StepStats
from aerorl_ops.rl.trainer import RLTrainer

WARMUP_DIR = "warmup"
EVAL_DEFAULTS = EvalSettings()
CONTROL_SEED_OFFSET = 7919

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SampledEval:
    """MAYE's evaluation of the policy at a global step: ``split`` is the environment's split label."""

    step: int
    phase: str
    env: str
    split: str
    outcome: EvalOutcome


@dataclass
class TrainingResult:
    run_dir: Path
    final_checkpoint: Path
    reference_source: str
    steps: list[StepStats] = field(default_factory=list)
    evals: list[EvalResult] = field(default_factory=list)
    sampled: list[SampledEval] = field(default_factory=list)
    swap: SwapCheck | None = None
    resumed_from_step: int = 0
    resumed_from: Path | None = None  # the checkpoint the run resumed from
    reference_loaded: bool = False

    def eval_of(self, phase: str) -> EvalResult | None:
        return next((e for e in reversed(self.evals) if e.phase == phase), None)


def run_training(base_model: str, run_dir: Path, settings: TrainingSettings, train_env: TaskEnv,
                 eval_env: TaskEnv, eval_indices: Sequence[int], device: str = "auto",
                 on_step: Callable[[StepStats], None] | None = None,
                 on_eval: Callable[[EvalResult], None] | None = None, resume: bool = True,
                 validation_env: TaskEnv | None = None,
                 on_sampled: Callable[[SampledEval], None] | None = None, dp: DataParallel = SINGLE,
                 rollout_engine: GenerationBackend | None = None,
                 on_resume: Callable[[ResumePoint], None] | None = None,
                 evaluation: EvalSettings = EVAL_DEFAULTS) -> TrainingResult:
    """Warm-up, RL and control of ``settings`` (checked where they came in), as the module docstring
    says; ``evaluation``: the sampled evaluations' sampling settings and batch size (the config's
    ``[eval]``); ``dp``: this process's rank;
    ``rollout_engine``: the vLLM engine settings of ``rollout_backend = "vllm"`` (``RLTrainer``);
    ``on_resume``: told where the run starts (rank 0), before any model loads; without it each torn
    checkpoint skipped is named in a warning (logger ``aerorl_ops.rl.training_run``)."""
    if len(train_env) == 0 or not eval_indices:
        raise ValueError(f"training needs training items ({train_env.name}: {len(train_env)}) and held-out items "
                         f"({len(eval_indices)})")
    run_dir = Path(run_dir)
    start = newest_complete_checkpoint(run_dir) if resume else ResumePoint()
    checkpoint, state = start.checkpoint, start.state
    if dp.is_main:
        (on_resume or warn_torn)(start)
    policy, reference = policy_and_reference(str(checkpoint) if checkpoint else base_model, settings, device=device)
    trainer = RLTrainer(settings, policy, dp=dp, rollout_engine=rollout_engine)
    sampled_settings = evaluation.sampling_settings()
    sampler = ItemSampler(train_env, settings.seed, settings.curriculum_stages)
    result = TrainingResult(run_dir, final_checkpoint=run_dir, reference_source="")
    clock = {"train_s": 0.0, "rl_s": 0.0}
    if state is not None:
        trainer.restore(state)
        result.resumed_from_step, result.resumed_from = state.step, checkpoint
        result.reference_source = state.reference_source

    def record_eval(phase: str, model_policy=policy, step: int | None = None) -> None:
        if not dp.is_main:
            return
        evaluation = evaluate_policy(model_policy.loaded, eval_env, eval_indices, settings.max_new_tokens,
                                     trainer.state.step if step is None else step, phase, clock["train_s"])
        result.evals.append(evaluation)
        if on_eval:
            on_eval(evaluation)
        if settings.sampled_eval_size and phase in ("warmup", "rl", "final") and model_policy is policy:
            record_sampled(phase, validation_env or eval_env, None)
            if phase == "final":
                record_sampled(phase, eval_env, eval_indices)

    def record_sampled(phase: str, env: TaskEnv, indices: Sequence[int] | None) -> None:
        chosen = list(indices or range(len(env)))[:settings.sampled_eval_size]
        outcome = evaluate_model(policy.loaded, env, chosen, sampled_settings,
                                 max_new_tokens=settings.max_new_tokens, batch_size=evaluation.batch_size,
                                 seed=settings.seed)
        split = env.items[chosen[0]].split if chosen else ""
        sampled = SampledEval(trainer.state.step, phase, env.name, split, outcome)
        result.sampled.append(sampled)
        if on_sampled:
            on_sampled(sampled)

    def record_step(stats: StepStats) -> None:
        stats = replace(stats, curriculum_stage=sampler.stage(stats.step - 1),
                        episodes_seen=settings.episodes_after(stats.step))
        clock["train_s"] += stats.step_s
        result.steps.append(stats)
        if on_step:
            on_step(stats)
        if trainer.state.step % settings.checkpoint_interval == 0 and dp.is_main:
            save_checkpoint(step_dir(run_dir, trainer.state.step), policy.loaded, trainer.optimizer,
                            trainer.state.step, result.reference_source, trainer.value_head)

    if dp.is_main:
        prior = prior_evaluation(train_env, eval_env, eval_indices)
        result.evals.append(prior)
        if on_eval:
            on_eval(prior)
    if trainer.state.step == 0:
        record_eval("base")
    while trainer.state.step < settings.warmup_steps:
        step = trainer.state.step
        trainer.set_learning_rate(learning_rate_at(step, settings.warmup_learning_rate, settings.warmup_steps,
                                                   settings.warmup_lr_schedule, settings.warmup_lr_warmup_steps,
                                                   settings.lr_min_ratio))
        record_step(trainer.supervised_step(train_env, sampler.batch(step, settings.warmup_batch_size)))
        if trainer.state.step == settings.warmup_steps:
            if dp.is_main:
                save_checkpoint(run_dir / WARMUP_DIR, policy.loaded, trainer.optimizer, trainer.state.step,
                                str(run_dir / WARMUP_DIR))
            dp.barrier()  # the reference of every rank loads this checkpoint
            result.reference_source = str(run_dir / WARMUP_DIR)
            record_eval("warmup")
        elif trainer.state.step % settings.eval_interval == 0:
            record_eval("warmup")
    if not result.reference_source:
        result.reference_source = base_model if settings.warmup_steps == 0 else str(run_dir / WARMUP_DIR)
    if settings.steps and settings.kl_coef > 0:  # lora_base: at the RL start, re-base the adapters (runtimes)
        reference.anchor(result.reference_source, rl_start=trainer.state.step == settings.warmup_steps)
        trainer.reference = reference
    try:
        while trainer.state.step < settings.total_steps:
            rl_index = trainer.state.step - settings.warmup_steps
            trainer.set_learning_rate(learning_rate_at(rl_index, settings.learning_rate, settings.steps,
                                                       settings.lr_schedule, settings.lr_warmup_steps,
                                                       settings.lr_min_ratio))
            stats = trainer.rl_step(train_env, sampler.batch(trainer.state.step, settings.prompts_per_step))
            clock["rl_s"] += stats.step_s
            record_step(stats)
            if trainer.state.step % settings.eval_interval == 0 and trainer.state.step < settings.total_steps:
                record_eval("rl")
    finally:
        trainer.close_rollouts()  # a vLLM rollout engine's memory back before the final evaluations and the control
    result.reference_loaded = reference._loaded is not None
    if not dp.is_main:
        return result
    result.final_checkpoint = save_checkpoint(step_dir(run_dir, trainer.state.step), policy.loaded,
                                              trainer.optimizer, trainer.state.step, result.reference_source,
                                              trainer.value_head)
    record_eval("final")
    if settings.swap_check_type:
        result.swap = image_swap_check(policy.loaded, eval_env, eval_indices, settings.swap_check_type,
                                       settings.max_new_tokens)
    if settings.control and settings.steps:
        run_control(result, settings, train_env, device, clock["rl_s"], record_eval)
    return result


def warn_torn(start: ResumePoint) -> None:
    for torn in start.skipped:
        logger.warning("skipped the torn checkpoint %s: %s", torn.path, torn.reason)


def run_control(result: TrainingResult, settings: TrainingSettings, train_env: TaskEnv, device: str,
                seconds: float, record_eval: Callable[..., None]) -> None:
    """Supervised training from the RL start checkpoint for ``seconds`` of training time (at least one step)."""
    start = result.reference_source
    policy, _ = policy_and_reference(start, settings, device=device)
    trainer = RLTrainer(settings, policy)
    if Path(start).is_dir() and (Path(start) / "trainer_state.pt").exists():
        trainer.optimizer.load_state_dict(load_checkpoint_state(Path(start)).optimizer)
    trainer.set_learning_rate(learning_rate_at(max(settings.warmup_steps - 1, 0), settings.warmup_learning_rate,
                                               settings.warmup_steps, settings.warmup_lr_schedule,
                                               settings.warmup_lr_warmup_steps, settings.lr_min_ratio))
    sampler = ItemSampler(train_env, settings.seed + CONTROL_SEED_OFFSET, settings.curriculum_stages)
    spent, steps = 0.0, 0
    while steps == 0 or spent < seconds:
        batch = sampler.batch(settings.warmup_steps + steps, settings.warmup_batch_size)
        stats = trainer.supervised_step(train_env, batch)
        spent += stats.step_s
        steps += 1
    record_eval("control", policy, settings.warmup_steps + steps)
