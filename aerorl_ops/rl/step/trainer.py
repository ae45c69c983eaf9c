"""``RLTrainer``: supervised and RL steps on a task environment, set by one ``Recipe`` (the settings
resolved once: ``TrainingSettings.resolve``; AeroRL's API, its tensor-only ``train_step`` and lifecycle,
is a facade: ``aerorl_ops.aerorl``).

- ``supervised_step(env, indices)``: teacher-forced masked NLL of each item's answer + EOS
  (vision, prompt and padding tokens excluded), token-mean over the batch.
- ``rl_step(env, prompts)``: ``group_size`` sampled replies per prompt graded by the environment
  (reward = ``env.step``'s reward). The rollout's log-probs (the PPO ratio's denominator), the
  reference's and, for PPO, the value head's values are stored; token rewards are the outcome
  reward at the last token, minus ``kl_coef`` x KL per token when the KL is in the reward;
  advantages come from the algorithm (``rl.core.algorithms``). Then ``ppo_epochs`` passes over the
  rollout, each of ``ppo_mini_batches`` optimizer updates of ``rl.step.loss.RLLoss`` (policy, KL,
  entropy and value terms). The first update's ratio is 1; later ones see the policy move, so
  the clip can bind.

Every update runs over ``grad_accumulation`` micro-batches, each loss weighted by its
``functional.aggregation_share``, so their summed gradients equal the one-big-batch gradient in
every ``loss_agg_mode``. An update whose loss or gradient is not finite is skipped (the step then
has ``skipped=True``); after ``max_nonfinite_steps`` such steps in a row the run stops with
:class:`NonFiniteTrainingError`.

Data parallelism (``rl.runtime.distributed``): with W ranks, every rank draws the same global batch and
owns, inside each minibatch, 1/W of its micro-batches (``DataParallel.share_rollout``); it generates,
scores and backpropagates only those. The rollout's lengths, scores, rewards and outcomes are gathered
in global micro-batch order, so advantages (group baselines, whitening, GAE) and every loss share (of the global
minibatch's mask) are computed over the global batch on every rank; a rank keeps its own rows at
the global response width, so the width-dependent ``seq-mean-token-sum-norm`` agrees too. Gradients
are summed over the ranks once per update, before clipping (to ``MAX_GRAD_NORM``). Update, loss and
statistics equal one process's on the same global batch (up to floating-point summation order).
With ``sharding = "fsdp2"`` the ranks hold shards of the policy, its gradients and AdamW state instead
of whole copies (``rl.runtime.sharding``: the gradients are summed by FSDP's reduce-scatter in each backward,
the clip takes the norm across shards); the micro-batches and the arithmetic are the same.

Rollouts come from the policy's ``generate``, or with ``rollout_backend = "vllm"`` from a vLLM engine
(``generation.vllm_sampler``) started at the first RL step, in this process, loaded with the policy's
weights before every RL step, so step k samples with the policy after update k-1. The engine's log-probs are never
used: ``step.scoring.score_rollout`` recomputes every token's with the policy. With several ranks each rank has an
engine of its own and samples its own micro-batches (``step.rollout_engine``); with ``vllm_sleep_mode`` the engine
sleeps from the end of the rollout to the next sync; :meth:`RLTrainer.close_rollouts` shuts the engine down.

With ``rollout_mode = "one_step_off"`` the update of step k trains on replies sampled with the weights
after step k-2 (``StepStats.behaviour_step``; sync: k-1), a frozen copy of the policy (``rl.step.behaviour``),
sampled in a worker thread during step k-1's update when ``rl_step`` is told the next step's prompts
(``rl.step.rollout_ahead``; else after it, in this thread: the same replies). The behaviour weights'
log-probs of the replies are recomputed; with ``rollout_is`` the PPO ratio is to the step's start
(``_score_rollout``) and every token's policy loss is weighted by ``functional.truncated_is_weight`` (verl's
``rollout_is``), else the ratio is to the behaviour log-probs.

Deliberate simplifications: minibatches are the rollout's micro-batches in a fixed order (not
reshuffled between epochs); one AdamW and one gradient clip over the policy and the value head
together (they share the decoder, and the loss is one sum). With ``kl_coef = 0`` the reference is
never loaded or run. Each step seeds torch from (seed, step), and each micro-batch's sampling from
(seed, step, its global index), so a resumed run samples what an uninterrupted one would, and W
ranks sample what one process would (dropout, with ``lora_dropout > 0``, draws per rank).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from aerorl_ops.config.fields import ConfigError
from aerorl_ops.config.training import Recipe, require_recipe
from aerorl_ops.config.training_rules import rollout_mode_problem, sharding_problem, sleep_mode_device_problem
from aerorl_ops.envs.base import TaskEnv, items_at
from aerorl_ops.models.entry import GenerationBackend
from aerorl_ops.rl.core.algorithms import build_algorithm, token_rewards
from aerorl_ops.rl.core.functional import explained_variance, kl_penalty, truncated_is_weight
from aerorl_ops.rl.runtime.checkpoint_files import CheckpointState
from aerorl_ops.rl.runtime.distributed import SINGLE, DataParallel, check_accumulation
from aerorl_ops.rl.runtime.policy import PolicyRuntime, ReferenceRuntime
from aerorl_ops.rl.runtime.sharded_checkpoint import state_module
from aerorl_ops.rl.runtime.sharding import held_bytes, sharding_for
from aerorl_ops.rl.runtime.value_head import ValueHead
from aerorl_ops.rl.step.behaviour import BehaviourWeights, SamplingWeights
from aerorl_ops.rl.step.loss import RLLoss, Targets
from aerorl_ops.rl.step.multi_turn import episode_images
from aerorl_ops.rl.step.rollout import supervised_batch
from aerorl_ops.rl.step.rollout_ahead import RolloutAhead, ahead_job
from aerorl_ops.rl.step.rollout_engine import RolloutEngine
from aerorl_ops.rl.step.rollout_rounds import sample_seed, step_rollout
from aerorl_ops.rl.step.rollout_samples import RolloutSample, rollout_samples, sampled_rows
from aerorl_ops.rl.step.scoring import score_rollout
from aerorl_ops.rl.step.sequences import SequenceBatch, completion_logprobs, completion_tokens
from aerorl_ops.rl.step.stats import StepOutcome, StepStats, accuracy_by_source, rl_step_extra, step_stats
from aerorl_ops.rl.step.step_parts import (
    Outcomes,
    RolloutScores,
    Update,
    response_layout,
    response_mask,
)
from aerorl_ops.rl.step.token_scoring import TokenScoring, scoring_path

MAX_GRAD_NORM = 1.0
"""Every update's gradient is clipped to this norm (not a setting)."""


class NonFiniteTrainingError(RuntimeError):
    """Too many steps in a row had a NaN or infinite loss or gradient."""


@dataclass
class TrainerState:
    step: int = 0
    nonfinite_in_a_row: int = 0
    skipped_steps: int = 0


class RLTrainer:
    """``rollout_engine``: the vLLM engine settings of ``rollout_backend = "vllm"`` (None: those of the
    policy's source when it is a vLLM source, else vLLM's defaults). ``settings``: a ``Recipe``, checked and
    resolved where they came in (the file, the command line, the run config); here only their split over
    ``dp``'s ranks is checked."""

    def __init__(self, settings: Recipe, policy: PolicyRuntime | None = None,
                 reference: ReferenceRuntime | None = None, dp: DataParallel = SINGLE,
                 rollout_engine: GenerationBackend | None = None) -> None:
        settings = require_recipe(settings, "RLTrainer")  # the algorithm's defaults filled in, once per run
        check_accumulation(settings.grad_accumulation, dp.world_size)
        device = policy.loaded.device if policy is not None else dp.device
        problem = (sleep_mode_device_problem(settings.vllm_sleep_mode, device.type)
                   or rollout_mode_problem(settings.rollout_mode, settings.rollout_backend, dp.world_size,
                                           settings.rollout_is, settings.algorithm, settings.policy_loss)
                   or sharding_problem(settings.sharding, settings.cpu_offload, settings.micro_batch_tokens,
                                       dp.world_size))
        if problem is not None:
            raise ConfigError(problem)
        self.settings = settings
        self.dp = dp
        self.sharding = sharding_for(settings, dp)  # how the ranks hold the policy, gradients and AdamW state
        self.scoring = TokenScoring.of(settings, device)  # the log-prob passes' machinery: packed, precision, kernel
        self.state_bytes = 0  # the most bytes of parameters, gradients and optimizer state this rank held
        self.policy = policy
        self.reference = reference
        self.algorithm = build_algorithm(settings.algorithm)
        self.loss = RLLoss.of(settings)
        self.state = TrainerState()
        self.rollout_samples: list[RolloutSample] = []  # the last RL step's sampled replies (``rollout_log_rate``)
        self._optimizer: torch.optim.Optimizer | None = None
        self._value_head: ValueHead | None = None
        self._synced: list[int] = []  # ids of the parameters last broadcast from rank 0
        self.rollouts = RolloutEngine(settings.rollout_backend, rollout_engine, settings.seed,
                                      settings.vllm_sleep_mode, dp.world_size)
        self._behaviour = BehaviourWeights()  # one_step_off: the frozen weights that sample the next step
        self._ahead = RolloutAhead()  # one_step_off: the next step's rollout, sampled during this step's update

    # ----- real steps on models -----
    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """AdamW over the policy's trainable parameters only (a frozen vision tower, LoRA's frozen base:
        no state), and the value head's (PPO). Rebuilt, with fresh state, when those parameters are no
        longer the ones it holds (a LoRA policy re-based at the RL start for the ``lora_base`` reference)."""
        params = [p for p in self.sharding.parameters(self._policy().loaded.model) if p.requires_grad]
        params += self.sharding.parameters(self.value_head) if self.value_head is not None else []
        held = [p for group in self._optimizer.param_groups for p in group["params"]] if self._optimizer else []
        if self._optimizer is None or [id(p) for p in held] != [id(p) for p in params]:
            self._optimizer = torch.optim.AdamW(params, lr=self.settings.learning_rate)
        return self._optimizer

    @property
    def value_head(self) -> ValueHead | None:
        """PPO's critic on the policy's last hidden state (built on first use); None for other algorithms."""
        if self.algorithm.critic and self._value_head is None:
            self._value_head = self.sharding.prepare_head(ValueHead.for_model(self._policy().loaded.model))
        return self._value_head

    def restore(self, state: CheckpointState) -> None:
        """Continue from a checkpoint's trainer state: the step, the value head (PPO), the optimizer."""
        self.state.step = state.step
        if self.value_head is not None and state.value_head is not None:
            self.sharding.load_head(self.value_head, state.value_head)
        self.load_optimizer(state)

    def load_optimizer(self, state: CheckpointState) -> None:
        """The optimizer's state from a checkpoint, sharded or not, whatever sharding wrote it."""
        self.sharding.load_optimizer(state_module(self._policy().loaded.model, self.value_head), self.optimizer,
                                     state)

    def save_checkpoint(self, directory: Path, reference_source: str, value_head: bool) -> Path:
        """The policy and this trainer's state as checkpoint ``directory`` (``rl.runtime.checkpoint_files``; with a
        sharded policy every rank writes its part: ``rl.runtime.sharded_checkpoint``); ``value_head``: with PPO's
        head."""
        loaded = self._policy().loaded
        return self.sharding.save(directory, loaded, self.optimizer, state_module(loaded.model, self.value_head),
                                  self.state.step, reference_source, self.value_head if value_head else None)

    def set_learning_rate(self, learning_rate: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate

    @property
    def learning_rate(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def _policy(self) -> PolicyRuntime:
        if self.policy is None:
            raise RuntimeError("this RLTrainer has no policy runtime; build one with "
                               "rl.runtime.policy.policy_and_reference(...)")
        self.sharding.prepare(self.policy, self.scoring)
        return self.policy

    def _seed_step(self) -> None:
        torch.manual_seed(self.settings.seed * 1_000_003 + self.state.step)

    def _sample_seed(self, part: int) -> int:
        """The torch seed of global micro-batch ``part``'s sampling at this step, whatever the world size."""
        return sample_seed(self.settings.seed, self.state.step, part)

    def _sync_parameters(self) -> None:
        """Rank 0's trainable parameters on every rank whenever the optimizer holds new ones (the first
        step; a LoRA policy re-based at the RL start), as DDP broadcasts them at construction."""
        if self.dp.world_size == 1:
            return
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        if [id(p) for p in params] != self._synced:
            self.sharding.broadcast_parameters(self.dp, params)
            self._synced = [id(p) for p in params]

    def _apply_update(self, loss: float) -> tuple[float, bool]:
        """The step's one update (``_optimizer_step``), then ``_count_step``."""
        grad_norm, skipped = self._optimizer_step(loss)
        self._count_step(skipped, f"loss {loss} / gradient norm {grad_norm}")
        return grad_norm, skipped

    def _optimizer_step(self, loss: float) -> tuple[float, bool]:
        """Sum the accumulated gradient over the ranks, clip and apply it, or skip it when it is not
        finite. ``loss`` is the global one (the same on every rank). Returns (gradient norm, skipped)."""
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        self.sharding.reduce_gradients(self.dp, params)
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, MAX_GRAD_NORM))
        finite = math.isfinite(loss) and math.isfinite(grad_norm)
        if finite:
            self.optimizer.step()
        self.state_bytes = max(self.state_bytes, held_bytes(self._policy().loaded.model, self.value_head,
                                                            self.optimizer))
        self.optimizer.zero_grad(set_to_none=True)
        return grad_norm, not finite

    def _count_step(self, skipped: bool, detail: str) -> None:
        """Advance the step; stop the run after ``max_nonfinite_steps`` skipped steps in a row."""
        self.state.nonfinite_in_a_row = self.state.nonfinite_in_a_row + 1 if skipped else 0
        self.state.skipped_steps += skipped
        self.state.step += 1
        if self.state.nonfinite_in_a_row >= self.settings.max_nonfinite_steps:
            raise NonFiniteTrainingError(
                f"step {self.state.step}: {detail} not finite in {self.state.nonfinite_in_a_row} steps in a row "
                f"(max_nonfinite_steps={self.settings.max_nonfinite_steps}); lower the learning rate or check the data")

    def accumulate_supervised(self, env: TaskEnv, indices: Sequence[int]) -> tuple[float, list[SequenceBatch]]:
        """Backward of the token-mean answer NLL (over the global batch's tokens) over this rank's
        micro-batches (no update). Returns the global loss and this rank's batches."""
        loaded, dp, items = self._policy().loaded, self.dp, items_at(env, indices)
        parts = dp.local_micro_batches(len(items), self.settings.grad_accumulation, "a supervised batch")
        batches = [supervised_batch(loaded, env, [items[row] for row in part]) for part in parts]
        (total,) = dp.sum([sum(int(b.completion_mask[:, 1:].sum()) for b in batches)])
        loss = 0.0
        for batch in batches:
            logprobs = completion_logprobs(loaded.model, batch).logprobs  # [n]
            part = -logprobs.sum() / max(total, 1)  # []
            part.backward()
            loss += float(part.detach())
        (loss,) = dp.sum([loss])
        return loss, batches

    def supervised_step(self, env: TaskEnv, indices: Sequence[int]) -> StepStats:
        """One masked-NLL update on the items' reference answers."""
        started = time.perf_counter()
        self._seed_step()
        self._sync_parameters()
        self.optimizer.zero_grad(set_to_none=True)
        loss, batches = self.accumulate_supervised(env, indices)
        grad_norm, skipped = self._apply_update(loss)
        return self._stats("warmup", loss, batches, None, {}, grad_norm, skipped, started)

    def close_rollouts(self) -> None:
        """Shut down the rollout engine, if one started (its memory back); a later RL step starts another."""
        self.rollouts.close()

    def rl_step(self, env: TaskEnv, prompts: Sequence[int],
                more_prompts: Callable[[int], Sequence[int]] | None = None,
                next_prompts: Callable[[int], Sequence[int]] | None = None) -> StepStats:
        """Rollout ``group_size`` replies per prompt, grade them, then ``ppo_epochs`` x
        ``ppo_mini_batches`` updates (see the module docstring). With dynamic sampling,
        ``more_prompts(r)`` gives sampling round r's prompts (``rl.step.rollout_rounds``). With one_step_off,
        ``next_prompts`` are the next RL step's (r = 0: its prompts), sampled during this step's update
        (``rl.step.rollout_ahead``); the next call must pass ``next_prompts(0)`` as its prompts."""
        if self.settings.kl_coef > 0 and self.reference is None:
            raise RuntimeError("rl_step with kl_coef > 0 needs a reference runtime")
        started = time.perf_counter()
        self._seed_step()
        self._sync_parameters()
        loaded, settings = self._policy().loaded, self.settings
        off_policy = settings.rollout_mode == "one_step_off"
        sampling = (self._behaviour.sampling(loaded, env, self.state.step) if off_policy
                    else SamplingWeights(loaded, False, self.state.step))
        rollout = self._ahead.take(self.state.step, env, prompts) if sampling.off_policy else None
        if rollout is None:  # not sampled during the previous update
            rollout = step_rollout(sampling.loaded, env, prompts, settings, self.dp, self._sample_seed,
                                   self.rollouts.synced(loaded, episode_images(env)), more_prompts)
            self.rollouts.sleep()  # vllm_sleep_mode: the update has the device until the next sync
        share, lengths, outcomes = rollout.share, rollout.lengths, rollout.outcomes  # [B] each
        local_rows = share.rows(loaded.device)  # [b]
        completion = response_mask(lengths, max(int(lengths.max()), 1))  # [B, L] replies (and env tokens)
        scored = self._score_rollout(rollout.batches, completion[local_rows])  # this rank's rows
        scores = RolloutScores(*share.gather_rollout(*scored, device=loaded.device))  # [B, L]
        old_logprob, is_weight = scores.logprob, None  # [B, L]: sync, the step's start sampled it
        if sampling.off_policy:
            (behaviour_logprob,) = share.gather_rollout(response_layout(
                self._behaviour.logprobs(rollout.batches, loaded.model.training), completion[local_rows]),
                device=loaded.device)  # [B, L]
            if settings.rollout_is:
                is_weight = truncated_is_weight(scores.logprob, behaviour_logprob, settings.rollout_is_cap)
            else:
                old_logprob = behaviour_logprob
        if off_policy:
            self._behaviour.take(loaded.model, self.state.step)  # the weights after this step's start: the next's
        mask = (completion if rollout.action_mask is None
                else completion * rollout.action_mask[:, :completion.shape[1]])  # [B, L] the model's own tokens
        kl = (kl_penalty(scores.logprob, scores.ref_logprob, settings.kl_kind)
              if scores.ref_logprob is not None else None)  # [B, L]
        in_reward = settings.kl_placement == "reward"
        rewards = token_rewards(outcomes.rewards, mask, kl if in_reward else None, settings.kl_coef,
                                rollout.token_rewards(mask))  # [B, L]
        estimate = self.algorithm.advantages(rewards, mask, rollout.group_ids, scores.values, settings.gamma,
                                             settings.gae_lambda)
        self.rollout_samples = rollout_samples(
            loaded.tokenizer, self.state.step + 1,
            sampled_rows(len(rollout.prompts), settings.rollout_log_rate, settings.seed, self.state.step + 1)
            if self.dp.is_main else [], rollout.items, rollout.token_ids, lengths, mask, outcomes.rewards,
            outcomes.correct, estimate.advantages, scores.logprob)  # the main rank's: it records them
        loss_mask = mask * ~outcomes.truncated[:, None] if settings.mask_truncated else mask  # [B, L]
        targets = Targets(old_logprob, estimate.advantages, estimate.returns, loss_mask,
                          None if in_reward else scores.ref_logprob, scores.values, is_weight)  # [B, L] each
        local = targets.rows(local_rows)  # [b, L] this rank's rows, at the global width
        minibatches = share.minibatches(rollout.batches, loss_mask)  # this rank's parts, the global minibatch mask
        ahead = (ahead_job(self._behaviour.sampling(loaded, env, self.state.step + 1).loaded, env, next_prompts,
                           settings, self.dp, self.state.step + 1) if off_policy and next_prompts is not None else None)
        with self._ahead.beside(ahead):  # the next step's rollout sampled while this step updates
            updates = [self._update(parts, local, whole) for _ in range(settings.ppo_epochs)
                       for parts, whole in minibatches]
        skipped = any(update.skipped for update in updates)
        self._count_step(skipped, "the loss or gradient of an update")
        passes = [stats for update in updates for stats in update.passes]
        extra = rl_step_extra(self.dp, kl, mask, scores.entropy, passes, rollout.groups, sampling.behaviour_step,
                              accuracy_by_source(env, rollout.items, outcomes.correct))
        if scores.values is not None:
            extra["value_loss"] = sum(update.value_loss for update in updates) / len(updates)
            extra["explained_variance"] = float(explained_variance(scores.values, estimate.returns, mask))
        return self._stats(settings.algorithm, sum(u.loss for u in updates) / len(updates), rollout.batches,
                           outcomes, extra, sum(u.grad_norm for u in updates) / len(updates), skipped, started)

    def _score_rollout(self, batches: list[SequenceBatch], mask: torch.Tensor) -> RolloutScores:
        """``step.scoring.score_rollout`` with this trainer's models (the reference when the KL term is on)."""
        reference = None if self.settings.kl_coef == 0 else self.reference
        return score_rollout(self._policy(), self.value_head, reference, batches, mask, self.scoring)

    def _stats(self, phase: str, loss: float, batches: list[SequenceBatch], outcomes: Outcomes | None,
               extra: dict[str, float | str | None], grad_norm: float, skipped: bool, started: float) -> StepStats:
        loaded = self._policy().loaded
        extra = {**extra, "scoring_path": scoring_path(loaded.model, self.scoring)}
        return step_stats(self.dp, loaded.device, StepOutcome(
            self.state.step, phase, loss, outcomes, extra, grad_norm, self.learning_rate, skipped), batches, started)

    def _update(self, parts: list[tuple[SequenceBatch, slice]], targets: Targets, whole: torch.Tensor) -> Update:
        """One optimizer update over a minibatch: this rank's micro-batches (with their rows of
        ``targets``) each weighted by its aggregation share of ``whole``, the mask of the minibatch's
        rows on every rank [b, L], so the gradient summed over the ranks is the whole minibatch's."""
        model = self._policy().loaded.model
        loss, value_loss, passes = 0.0, 0.0, []
        self.optimizer.zero_grad(set_to_none=True)
        for batch, span in parts:
            part = targets.rows(span)
            shares = self.loss.shares(part.mask, whole)
            tokens = completion_tokens(model, batch)  # [n], [n], [n, H] with gradients
            values = (response_layout(self.value_head(tokens.hidden), part.mask)
                      if self.value_head is not None else None)  # [b', L]
            part_loss, stats = self.loss(response_layout(tokens.logprobs, part.mask),
                                         response_layout(tokens.entropy, part.mask), values, part, shares)
            part_loss.weighted.backward()
            loss += part_loss.value
            value_loss += (stats.value_loss or 0.0) * shares.other
            passes.append(stats)
        loss, value_loss = self.dp.sum([loss, value_loss])
        grad_norm, skipped = self._optimizer_step(loss)
        return Update(loss, value_loss if self.value_head is not None else None, grad_norm, skipped, passes)
