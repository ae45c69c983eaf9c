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
   ``eval_interval`` global steps the held-out sample is evaluated in either phase (``warmup`` / ``rl``).
   On a multi-turn environment every evaluation plays whole episodes (``rl.step.episode_evaluation``: success
   rate, mean return, mean turns); every held-out distribution (the training dataset's ``held_out``) is
   evaluated beside the held-out sample, each in rows of its own;
5. the **control**: supervised training from the warm-up checkpoint (its optimizer state too,
   at the warm-up's last learning rate) for the RL phase's training seconds, evaluated at the end
   (``control``). What RL adds is then read against what the same time of supervised training adds;
6. checkpoints every ``checkpoint_interval`` steps and at the end of the warm-up, each written once its step's
   evaluation is recorded (crash-safe, ``rl.runtime.checkpoint_files``); a rerun resumes from the newest complete
   one (the reporter's ``on_resume`` is told which, and which torn ones it skipped);
7. with ``sampled_eval_size > 0``, MAYE's evaluation (``eval_runner.runner.evaluate_model``: pass@k and
   pass@1 at the ``[eval]`` sampling settings, response length, clip ratio, reflection) of that many
   ``validation_env`` items beside every held-out evaluation of the warm-up and RL phases, and of
   the held-out items at the end (``TrainingResult.sampled``).

Steps are numbered globally (warm-up steps first). Evaluations use greedy decoding; their
``wall_s`` is training seconds (evaluations excluded).

With several data-parallel ranks (``dp``, ``rl.runtime.distributed``) every rank trains (the trainer
shards each step's micro-batches), and rank 0 alone evaluates, checkpoints, runs the image-swap
check and the control, and reports (``rl.record.reporters``): :meth:`TrainingRun.main_work` is where that is
decided, and every other rank's run holds the null reporter. The other ranks skip that work and meet
rank 0 at the next collective. They wait at a barrier only for the warm-up checkpoint, which the
reference loads. With ``sharding = "fsdp2"`` (``rl.runtime.sharding``) no rank holds the whole policy, so every
rank does that work with rank 0 (each forward pass gathers the parameters from all of them; each rank
writes its shards of a checkpoint), and still only rank 0 reports and writes the policy's files. The
run id (:func:`training_run_id`) is a stable hash of the settings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TypeVar

import torch

from aerorl_ops.config.evaluation import EvalSettings
from aerorl_ops.config.training import Recipe, TrainingSettings, require_recipe
from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.eval_runner.episodes import observe_all
from aerorl_ops.eval_runner.held_out import EvalResult, image_swap_check, prior_evaluation
from aerorl_ops.eval_runner.replies import encode_observations
from aerorl_ops.eval_runner.runner import evaluate_model
from aerorl_ops.models.checkpoint_refs import step_folder
from aerorl_ops.models.entry import DECODE_AUTO, GenerationBackend
from aerorl_ops.rl.record.reporters import NULL_REPORTER, CallbackReporter, RunReporter, warn_torn
from aerorl_ops.rl.record.result import SampledEval, TrainingResult
from aerorl_ops.rl.runtime.checkpoint_files import ResumePoint, load_checkpoint_state, newest_complete_checkpoint
from aerorl_ops.rl.runtime.distributed import SINGLE, DataParallel
from aerorl_ops.rl.runtime.policy import PolicyRuntime, policy_and_reference
from aerorl_ops.rl.step.episode_evaluation import held_out_evaluation
from aerorl_ops.rl.step.multi_turn import check_sharded_environment, sample_episodes
from aerorl_ops.rl.step.per_token_inputs import check_per_token_inputs
from aerorl_ops.rl.step.schedule import ItemSampler, learning_rate_at, warmup_learning_rate
from aerorl_ops.rl.step.stats import StepStats
from aerorl_ops.rl.step.trainer import RLTrainer
from aerorl_ops.stop import stop_here, stop_requested

WARMUP_DIR = "warmup"
EVAL_DEFAULTS = EvalSettings()
CONTROL_SEED_OFFSET = 7919
SAMPLED_PHASES = ("warmup", "rl", "final")
"""The phases whose held-out evaluations MAYE's sampled evaluation accompanies."""

T = TypeVar("T")


@dataclass
class Clock:
    """Training seconds so far (evaluations excluded): all steps, and the RL phase's alone."""

    train_s: float = 0.0
    rl_s: float = 0.0


class TrainingRun:
    """One run of the module docstring's algorithm; :meth:`run` trains it. ``evaluation``: the sampled
    evaluations' sampling settings and batch size (the config's ``[eval]``); ``dp``: this process's
    rank; ``rollout_engine``: the vLLM engine settings of ``rollout_backend = "vllm"`` (``RLTrainer``);
    ``reporter``: told of the run on the main rank only (``rl.record.reporters``); ``chat_template``: the base
    model's configured one (``[models.<key>] chat_template``; empty: each checkpoint's own), which the
    run's checkpoints save with their processor; ``decode``: its ``[models.<key>] decode`` path
    (``generation.decode``), for rollouts and evaluations. ``settings``: the run's ``Recipe``
    (``TrainingSettings.resolve``). ``distributions``: the held-out distributions by name, each evaluated whole
    beside every held-out evaluation (``EvalResult.distribution`` = its name)."""

    def __init__(self, base_model: str, run_dir: Path, settings: Recipe, train_env: TaskEnv,
                 eval_env: TaskEnv, eval_indices: Sequence[int], *, device: str = "auto", resume: bool = True,
                 validation_env: TaskEnv | None = None, dp: DataParallel = SINGLE,
                 rollout_engine: GenerationBackend | None = None, evaluation: EvalSettings = EVAL_DEFAULTS,
                 reporter: RunReporter = NULL_REPORTER, dtype: torch.dtype = torch.float32,
                 chat_template: str = "", decode: str = DECODE_AUTO,
                 distributions: Mapping[str, TaskEnv] | None = None) -> None:
        if len(train_env) == 0 or not eval_indices:
            raise ValueError(f"training needs training items ({train_env.name}: {len(train_env)}) and held-out "
                             f"items ({len(eval_indices)})")
        settings = require_recipe(settings, "TrainingRun")
        check_sharded_environment(settings, train_env, dp.world_size)
        self.base_model, self.run_dir, self.settings = base_model, Path(run_dir), settings
        self.train_env, self.eval_env, self.eval_indices = train_env, eval_env, eval_indices
        self.validation_env, self.device, self.resume, self.dp = validation_env, device, resume, dp
        self.rollout_engine, self.evaluation, self.dtype = rollout_engine, evaluation, dtype
        self.chat_template, self.decode = chat_template, decode
        self.distributions = dict(distributions or {})
        self.reporter = reporter if dp.is_main else NULL_REPORTER
        self.sampler = ItemSampler(train_env, settings.seed, settings.curriculum_stages)
        self.result = TrainingResult(self.run_dir, final_checkpoint=self.run_dir, reference_source="")
        self.clock = Clock()

    def main_work(self, work: Callable[..., T], *args: object) -> T | None:
        """``work(*args)`` (evaluations, checkpoints, the control) on the main rank, None elsewhere; with a
        sharded policy on every rank, whose forward passes and checkpoint writes need them all."""
        return work(*args) if self.dp.is_main or self.trainer.sharding.collective else None

    def run(self) -> TrainingResult:
        """Every phase in turn (the module docstring); on a rank other than the main one, only training."""
        start = newest_complete_checkpoint(self.run_dir) if self.resume else ResumePoint()
        self.reporter.on_resume(start)
        self.policy, self.reference = policy_and_reference(str(start.checkpoint) if start.checkpoint
                                                           else self.base_model, self.settings, device=self.device,
                                                           dtype=self.dtype, chat_template=self.chat_template,
                                                           decode=self.decode)
        self.trainer = RLTrainer(self.settings, self.policy, dp=self.dp, rollout_engine=self.rollout_engine)
        if start.state is not None:
            self.trainer.restore(start.state)
            self.result.resumed_from_step, self.result.resumed_from = start.state.step, start.checkpoint
            self.result.reference_source = start.state.reference_source
        self.trainer.prepare_scoring()  # before the first evaluation decodes
        self.main_work(self._start_evaluations)
        self._check_inputs()
        self._warmup()
        self._anchor_reference()
        self._reinforce()
        self.result.state_bytes_per_rank = self.dp.max(self.trainer.state_bytes) or None  # None: no update ran
        self.result.reference_loaded = self.reference.is_loaded
        self.result.reference_unquantized = self.reference.unquantized
        self.main_work(self._finish)
        return self.result

    # ----- phases -----
    def _check_inputs(self) -> None:
        """Before any step: a per-token input of the model's processor that a batch could not extend over a
        completion (``rl.step.per_token_inputs``) is an error naming it. The policy has loaded for the base
        evaluation; elsewhere (another rank, a resumed run) it loads here rather than at the first step."""
        loaded = self.policy.loaded
        first = observe_all(self.train_env, self.train_env.items[:1])
        check_per_token_inputs(loaded.model, encode_observations(loaded, first))

    def _start_evaluations(self) -> None:
        """The no-image prior, and the base policy when the run starts at step 0."""
        prior = prior_evaluation(self.train_env, self.eval_env, self.eval_indices)
        self.result.evals.append(prior)
        self.reporter.on_eval(prior)
        if self.trainer.state.step == 0:
            self._evaluate("base")

    def _warmup(self) -> None:
        settings, trainer = self.settings, self.trainer
        while trainer.state.step < settings.warmup_steps:
            step = trainer.state.step
            trainer.set_learning_rate(warmup_learning_rate(settings, step))
            self._record_step(trainer.supervised_step(self.train_env,
                                                      self.sampler.batch(step, settings.warmup_batch_size)))
            if trainer.state.step == settings.warmup_steps:
                self.main_work(self._save, self.run_dir / WARMUP_DIR, str(self.run_dir / WARMUP_DIR), False)
                self.dp.barrier()  # the reference of every rank loads this checkpoint
                self.result.reference_source = str(self.run_dir / WARMUP_DIR)
                self.main_work(self._evaluate, "warmup")
            elif trainer.state.step % settings.eval_interval == 0:
                self.main_work(self._evaluate, "warmup")
            self._step_done(phase_end=trainer.state.step == settings.warmup_steps and settings.steps > 0)

    def _anchor_reference(self) -> None:
        """The reference is the model RL starts from (with ``kl_coef = 0`` none is loaded); lora_base
        re-bases the adapters at the RL start (``rl.runtime.policy``)."""
        settings = self.settings
        if not self.result.reference_source:
            self.result.reference_source = (self.base_model if settings.warmup_steps == 0
                                            else str(self.run_dir / WARMUP_DIR))
        if settings.steps and settings.kl_coef > 0:
            self.reference.anchor(self.result.reference_source,
                                  rl_start=self.trainer.state.step == settings.warmup_steps)
            self.trainer.reference = self.reference

    def _reinforce(self) -> None:
        settings, trainer = self.settings, self.trainer
        try:
            while trainer.state.step < settings.total_steps:
                rl_index = trainer.state.step - settings.warmup_steps
                trainer.set_learning_rate(learning_rate_at(rl_index, settings.learning_rate, settings.steps,
                                                           settings.lr_schedule, settings.lr_warmup_steps,
                                                           settings.lr_min_ratio))
                step = trainer.state.step
                draws = partial(self.sampler.batch, step, settings.prompts_per_step)  # draw -> items
                following = (partial(self.sampler.batch, step + 1, settings.prompts_per_step)
                             if step + 1 < settings.total_steps else None)  # one_step_off samples them meanwhile
                stats = trainer.rl_step(self.train_env, draws(0), draws, following)
                self.clock.rl_s += stats.step_s
                self._record_step(stats)
                if trainer.rollout_samples:
                    self.reporter.on_rollouts(trainer.rollout_samples)
                if trainer.state.step % settings.eval_interval == 0 and trainer.state.step < settings.total_steps:
                    self.main_work(self._evaluate, "rl")
                self._step_done()
        finally:
            trainer.close_rollouts()  # a vLLM engine's memory back before the final evaluations and the control

    def _finish(self) -> None:
        """The final checkpoint and evaluation, the image-swap check and the control (main rank)."""
        settings = self.settings
        self.result.final_checkpoint = self._save(step_folder(self.run_dir, self.trainer.state.step),
                                                  self.result.reference_source, True)
        self._evaluate("final")
        if settings.swap_check_type:
            self.result.swap = image_swap_check(self.policy.loaded, self.eval_env, self.eval_indices,
                                                settings.swap_check_type, settings.max_new_tokens)
        if settings.control and settings.steps:
            self._control()

    def _control(self) -> None:
        """Supervised training from the RL start checkpoint for the RL phase's training seconds (at
        least one step), evaluated as phase ``control``."""
        settings, start = self.settings, self.result.reference_source
        policy, _ = policy_and_reference(start, settings, device=self.device, dtype=self.dtype,
                                         chat_template=self.chat_template, decode=self.decode)
        dp = self.dp if self.trainer.sharding.collective else SINGLE  # sharded: on every rank, as the run
        trainer = RLTrainer(settings, policy, dp=dp)
        if Path(start).is_dir() and (Path(start) / "trainer_state.pt").exists():
            trainer.load_optimizer(load_checkpoint_state(Path(start)))
        trainer.set_learning_rate(warmup_learning_rate(settings, max(settings.warmup_steps - 1, 0)))
        sampler = ItemSampler(self.train_env, settings.seed + CONTROL_SEED_OFFSET, settings.curriculum_stages)
        spent, steps = 0.0, 0
        while dp.max(int(steps == 0 or spent < self.clock.rl_s)):  # ranks' clocks differ: while any is short
            batch = sampler.batch(settings.warmup_steps + steps, settings.warmup_batch_size)
            stats = trainer.supervised_step(self.train_env, batch)
            spent += stats.step_s
            steps += 1
        self._evaluate("control", policy, settings.warmup_steps + steps)

    # ----- what each step and evaluation leaves -----
    def _record_step(self, stats: StepStats) -> None:
        stats = replace(stats, curriculum_stage=self.sampler.stage(stats.step - 1),
                        episodes_seen=self.settings.episodes_after(stats.step))
        self.clock.train_s += stats.step_s
        self.result.steps.append(stats)
        self.reporter.on_step(stats)

    def _step_done(self, phase_end: bool = False) -> None:
        """After a step and what follows it (its evaluation, the warm-up's reference checkpoint): the step's
        checkpoint, every ``checkpoint_interval`` steps, at the end of the warm-up (``phase_end``: a resumed run
        then skips the base evaluation and the warm-up) and when a signal asked to stop (the rerun goes on from
        this step: a run stopped every minute still gets on), then the stop. A checkpoint is written last, so a
        run resumed from it has every row and folder of its step: written before the evaluation, a kill between
        the two lost that evaluation's rows, and before the warm-up's ``warmup`` folder, the reference the resumed
        run loads."""
        step, stopping = self.trainer.state.step, self.dp.max(int(stop_requested() is not None))
        if phase_end or stopping or step % self.settings.checkpoint_interval == 0:
            self.main_work(self._save, step_folder(self.run_dir, step), self.result.reference_source, True)
        if stop_requested() is not None:  # a signal asked to stop: here, with the step recorded, nothing is lost
            stop_here(self._interrupted_line())

    def _interrupted_line(self) -> str:
        newest = newest_complete_checkpoint(self.run_dir).checkpoint
        where = f"checkpoint {newest.name}" if newest else "no checkpoint yet: it starts over"
        return (f"interrupted after step {self.trainer.state.step} of {self.settings.total_steps}; resume with the "
                f"same command ({where})")

    def _save(self, folder: Path, reference_source: str, value_head: bool) -> Path:
        return self.trainer.save_checkpoint(folder, reference_source, value_head)

    def _evaluate(self, phase: str, policy: PolicyRuntime | None = None, step: int | None = None) -> None:
        """The held-out evaluation of ``policy`` (the run's own by default) at ``step`` (the trainer's),
        and MAYE's sampled evaluations beside the run's own policy's in ``SAMPLED_PHASES``."""
        own = policy is None
        policy = self.policy if policy is None else policy
        step = self.trainer.state.step if step is None else step
        evaluated = [(None, self.eval_env, self.eval_indices),
                     *((name, env, range(len(env))) for name, env in self.distributions.items())]
        for distribution, env, indices in evaluated:
            result = held_out_evaluation(policy.loaded, env, indices, self.settings.max_new_tokens, step, phase,
                                         self.clock.train_s, distribution)
            self.result.evals.append(result)
            self.reporter.on_eval(result)
        if self.settings.sampled_eval_size and phase in SAMPLED_PHASES and own:
            self._sampled(phase, self.validation_env or self.eval_env, None)
            if phase == "final":
                self._sampled(phase, self.eval_env, self.eval_indices)

    def _sampled(self, phase: str, env: TaskEnv, indices: Sequence[int] | None) -> None:
        settings = self.settings
        chosen = list(indices or range(len(env)))[:settings.sampled_eval_size]
        outcome = evaluate_model(self.policy.loaded, env, chosen, self.evaluation.sampling_settings(),
                                 max_new_tokens=settings.max_new_tokens, batch_size=self.evaluation.batch_size,
                                 seed=settings.seed, play=sample_episodes)
        split = env.items[chosen[0]].split if chosen else ""
        sampled = SampledEval(self.trainer.state.step, phase, env.name, split, outcome)
        self.result.sampled.append(sampled)
        self.reporter.on_sampled(sampled)


def run_training(base_model: str, run_dir: Path, settings: TrainingSettings, train_env: TaskEnv,
                 eval_env: TaskEnv, eval_indices: Sequence[int], device: str = "auto",
                 on_step: Callable[[StepStats], None] | None = None,
                 on_eval: Callable[[EvalResult], None] | None = None, resume: bool = True,
                 validation_env: TaskEnv | None = None,
                 on_sampled: Callable[[SampledEval], None] | None = None, dp: DataParallel = SINGLE,
                 rollout_engine: GenerationBackend | None = None,
                 on_resume: Callable[[ResumePoint], None] = warn_torn,
                 evaluation: EvalSettings = EVAL_DEFAULTS,
                 distributions: Mapping[str, TaskEnv] | None = None) -> TrainingResult:
    """A :class:`TrainingRun` of ``settings`` (resolved here, once) reporting to plain callables
    (``rl.record.reporters.CallbackReporter``; without ``on_resume`` each torn checkpoint skipped is named in
    a warning), trained."""
    reporter = CallbackReporter(on_step, on_eval, on_sampled, on_resume)
    return TrainingRun(base_model, run_dir, settings.resolve(), train_env, eval_env, eval_indices, device=device,
                       resume=resume, validation_env=validation_env, dp=dp, rollout_engine=rollout_engine,
                       evaluation=evaluation, reporter=reporter, distributions=distributions).run()
