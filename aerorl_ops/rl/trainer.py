"""``AeroRLTrainer``: supervised and RL steps on a task environment, with AeroRL's lifecycle.

- ``train_step(logits=, labels=, vision_mask=, optimizer=)``: AeroRL's tensor-only quickstart.
- ``supervised_step(env, indices)``: teacher-forced masked NLL of each item's answer + EOS
  (vision, prompt and padding tokens excluded), token-mean over the batch.
- ``rl_step(env, prompts)``: ``group_size`` sampled replies per prompt graded by the environment
  (reward = ``env.step``'s reward), advantages from the configured algorithm, one update of
  ``functional.policy_loss`` plus ``kl_coef`` x k3 KL to the frozen reference (token-mean).

Every step runs over ``grad_accumulation`` micro-batches whose losses are each divided by the
whole batch's token count, so their summed gradients equal the one-big-batch gradient. A step
whose loss or gradient is not finite is skipped (no update, ``skipped=True``); after
``max_nonfinite_steps`` skipped steps in a row the run stops with :class:`NonFiniteTrainingError`.

Deliberate simplifications: one optimisation pass per rollout (the importance ratio is 1 and the
clip never binds), no value model, AdamW. With ``kl_coef = 0`` the reference is never loaded or run.
Each step seeds torch from (seed, step), so a resumed run samples what an uninterrupted one would.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from aerorl_ops.aerorl_compat import resolve_trainer_backend
from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.losses import masked_cross_entropy_loss
from aerorl_ops.rl.algorithms import build_algorithm
from aerorl_ops.rl.config import AeroRLConfig
from aerorl_ops.rl.functional import aggregate_loss, kl_penalty, policy_loss
from aerorl_ops.rl.rollout import Rollout, Sampling, collect_rollout, micro_batches, supervised_batch
from aerorl_ops.rl.runtimes import PolicyRuntime, ReferenceRuntime
from aerorl_ops.rl.sequences import SequenceBatch, completion_logprobs
from aerorl_ops.rl.stats import StepStats, peak_memory_mb


class NonFiniteTrainingError(RuntimeError):
    """Too many steps in a row had a NaN or infinite loss or gradient."""


@dataclass
class TrainerState:
    step: int = 0
    started: bool = False
    finished: bool = False
    nonfinite_in_a_row: int = 0
    skipped_steps: int = 0


def response_layout(flat: torch.Tensor, lengths: torch.Tensor, width: int) -> torch.Tensor:
    """Row-major flattened per-token values [N] -> right-padded [B, width] (gradient kept)."""
    mask = torch.arange(width, device=lengths.device)[None, :] < lengths[:, None]  # [B, width]
    return torch.zeros(mask.shape, dtype=flat.dtype, device=flat.device).masked_scatter(mask.to(flat.device), flat)


def response_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    return (torch.arange(width, device=lengths.device)[None, :] < lengths[:, None]).float()  # [B, width]


class AeroRLTrainer:
    def __init__(self, config: AeroRLConfig, policy: PolicyRuntime | None = None,
                 reference: ReferenceRuntime | None = None) -> None:
        config.validate()
        self.config = config
        self.adapter = resolve_trainer_backend(config.trainer_backend)
        self.policy = policy
        self.reference = reference
        self.algorithm = build_algorithm(config.algorithm)
        self.state = TrainerState()
        self._optimizer: torch.optim.Optimizer | None = None

    # ----- lifecycle (AeroRL's) -----
    def on_train_start(self) -> dict[str, Any]:
        self.state.started, self.state.finished = True, False
        return {"status": "started", "backend": self.adapter.backend, "backend_available": self.adapter.available}

    def on_train_end(self) -> dict[str, Any]:
        self.state.finished = True
        return {"status": "finished", "steps": self.state.step, "backend": self.adapter.backend}

    # ----- AeroRL's tensor-only quickstart -----
    def compute_masked_loss(self, logits: torch.Tensor, labels: torch.Tensor,
                            vision_mask: torch.Tensor) -> torch.Tensor:
        if not self.config.mask_vision_tokens:
            vision_mask = torch.zeros_like(vision_mask, dtype=torch.bool)
        return masked_cross_entropy_loss(logits=logits, labels=labels, vision_mask=vision_mask)

    def train_step(self, logits: torch.Tensor, labels: torch.Tensor, vision_mask: torch.Tensor,
                   optimizer: torch.optim.Optimizer | None = None) -> dict[str, Any]:
        if not self.state.started:
            self.on_train_start()
        loss = self.compute_masked_loss(logits, labels, vision_mask)
        loss.backward()
        if optimizer is not None:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        self.state.step += 1
        return {"step": self.state.step, "loss": float(loss.detach()), "backend": self.adapter.backend}

    # ----- real steps on models -----
    @property
    def optimizer(self) -> torch.optim.Optimizer:
        if self._optimizer is None:
            params = [p for p in self._policy().loaded.model.parameters() if p.requires_grad]
            self._optimizer = torch.optim.AdamW(params, lr=self.config.learning_rate)
        return self._optimizer

    def set_learning_rate(self, learning_rate: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate

    @property
    def learning_rate(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def _policy(self) -> PolicyRuntime:
        if self.policy is None:
            raise RuntimeError("this AeroRLTrainer has no policy runtime; build one with wrap_vlm_for_rl(...)")
        return self.policy

    def _seed_step(self) -> None:
        torch.manual_seed(self.config.seed * 1_000_003 + self.state.step)

    def _apply_update(self, loss: float) -> tuple[float, bool]:
        """Clip and apply the accumulated gradient, or skip it when it is not finite."""
        model = self._policy().loaded.model
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), self.config.max_grad_norm))
        finite = math.isfinite(loss) and math.isfinite(grad_norm)
        if finite:
            self.optimizer.step()
            self.state.nonfinite_in_a_row = 0
        else:
            self.state.nonfinite_in_a_row += 1
            self.state.skipped_steps += 1
        self.optimizer.zero_grad(set_to_none=True)
        self.state.step += 1
        if self.state.nonfinite_in_a_row >= self.config.max_nonfinite_steps:
            raise NonFiniteTrainingError(
                f"step {self.state.step}: loss {loss} / gradient norm {grad_norm} not finite in "
                f"{self.state.nonfinite_in_a_row} steps in a row (max_nonfinite_steps="
                f"{self.config.max_nonfinite_steps}); lower the learning rate or check the data")
        return grad_norm, not finite

    def accumulate_supervised(self, env: TaskEnv, indices: Sequence[int]) -> tuple[float, list[SequenceBatch]]:
        """Backward of the token-mean answer NLL over micro-batches (no update). Returns the loss."""
        loaded = self._policy().loaded
        parts = micro_batches(indices, self.config.grad_accumulation)
        batches = [supervised_batch(loaded, env, part) for part in parts]
        total = sum(int(b.completion_mask[:, 1:].sum()) for b in batches)
        loss = 0.0
        for batch in batches:
            logprobs = completion_logprobs(loaded.model, batch).logprobs  # [n]
            part = -logprobs.sum() / max(total, 1)  # []
            part.backward()
            loss += float(part.detach())
        return loss, batches

    def supervised_step(self, env: TaskEnv, indices: Sequence[int]) -> StepStats:
        """One masked-NLL update on the items' reference answers."""
        if not self.state.started:
            self.on_train_start()
        started = time.perf_counter()
        self._seed_step()
        self.optimizer.zero_grad(set_to_none=True)
        loss, batches = self.accumulate_supervised(env, indices)
        grad_norm, skipped = self._apply_update(loss)
        return self._stats("warmup", loss, batches, None, {}, grad_norm, skipped, started)

    def _reference_logprobs(self, batch: SequenceBatch) -> torch.Tensor | None:
        if self.config.kl_coef == 0 or self.reference is None:
            return None
        reference = self.reference
        with torch.inference_mode():
            flat = completion_logprobs(reference.loaded.model, _on(batch, reference.device)).logprobs  # [n]
        return flat.clone().to(self._policy().loaded.device)  # leave inference mode: usable in autograd graphs

    def rl_step(self, env: TaskEnv, prompts: Sequence[int]) -> StepStats:
        """Rollout ``group_size`` replies per prompt, grade them, one policy-gradient update."""
        if self.config.kl_coef > 0 and self.reference is None:
            raise RuntimeError("rl_step with kl_coef > 0 needs a reference runtime")
        if not self.state.started:
            self.on_train_start()
        started = time.perf_counter()
        self._seed_step()
        loaded = self._policy().loaded
        config = self.config
        sampling = Sampling(config.temperature, config.top_k, config.top_p)
        rollout = collect_rollout(loaded, env, prompts, config.group_size, config.max_new_tokens, sampling,
                                  config.grad_accumulation)
        lengths = torch.tensor([len(ids) for ids in rollout.replies.token_ids])  # [B]
        width = max(int(lengths.max()), 1)
        mask = response_mask(lengths, width)  # [B, L]
        old, ref = [], []
        with torch.no_grad():
            for batch in rollout.batches:
                old.append(completion_logprobs(loaded.model, batch).logprobs)
                ref.append(self._reference_logprobs(batch))
        old_logprob = response_layout(torch.cat(old), lengths, width)  # [B, L]
        ref_logprob = response_layout(torch.cat(ref), lengths, width) if ref[0] is not None else None  # [B, L]
        advantages = self.algorithm.advantages(rollout.graded.rewards, mask, rollout.indices, old_logprob,
                                               ref_logprob, config.kl_coef).advantages  # [B, L]
        total = max(float(mask.sum()), 1.0)
        self.optimizer.zero_grad(set_to_none=True)
        loss = kl_sum = clip_sum = entropy_sum = 0.0
        row = 0
        for batch in rollout.batches:
            rows = slice(row, row + batch.input_ids.shape[0])
            row = rows.stop
            current = completion_logprobs(loaded.model, batch)  # [n] with grad
            logprob = response_layout(current.logprobs, lengths[rows], width)  # [b, L]
            part = policy_loss(old_logprob[rows], logprob, advantages[rows], mask[rows], config.clip_eps,
                               config.clip_eps, agg_mode="token-sum")
            part_loss = part.loss / total  # []
            tokens = float(mask[rows].sum())
            if ref_logprob is not None and not self.algorithm.kl_in_reward:
                kl = aggregate_loss(kl_penalty(logprob, ref_logprob[rows], "k3"), mask[rows], "token-sum")  # []
                part_loss = part_loss + config.kl_coef * kl / total
                kl_sum += float(kl.detach())
            elif ref_logprob is not None:
                kl_sum += float(aggregate_loss(kl_penalty(logprob.detach(), ref_logprob[rows], "k3"), mask[rows],
                                               "token-sum"))
            part_loss.backward()
            loss += float(part_loss.detach())
            clip_sum += float(part.clipfrac) * tokens
            entropy_sum += float(current.entropy.detach().sum()) if current.entropy.numel() else 0.0
        grad_norm, skipped = self._apply_update(loss)
        extra = {"kl": kl_sum / total if ref_logprob is not None else None, "clip_fraction": clip_sum / total,
                 "entropy": entropy_sum / total}
        return self._stats(config.algorithm, loss, rollout.batches, rollout, extra, grad_norm, skipped, started)

    def _stats(self, phase: str, loss: float, batches: list[SequenceBatch], rollout: Rollout | None,
               extra: dict[str, float | None], grad_norm: float, skipped: bool, started: float) -> StepStats:
        elapsed = time.perf_counter() - started
        attended = sum(float(b.inputs["attention_mask"].sum()) for b in batches)
        counted = sum(float(b.completion_mask.sum()) for b in batches)
        vision = sum(float((b.vision_mask & b.inputs["attention_mask"].bool()).sum()) for b in batches)
        rows = sum(b.input_ids.shape[0] for b in batches)
        graded = rollout.graded if rollout is not None else None
        return StepStats(
            step=self.state.step, phase=phase, loss=loss,
            reward_mean=float(graded.rewards.mean()) if graded else None,
            reward_std=float(graded.rewards.std(unbiased=False)) if graded else None,
            accuracy=float(graded.correct.float().mean()) if graded else None,
            kl=extra.get("kl"), entropy=extra.get("entropy"), clip_fraction=extra.get("clip_fraction"),
            response_clip_ratio=(sum(rollout.replies.truncated) / len(rollout.replies.truncated)
                                 if rollout is not None else None),
            response_length=counted / rows if rows else 0.0,
            masked_token_fraction=counted / attended if attended else 0.0,
            vision_token_fraction=vision / attended if attended else 0.0,
            tokens_per_s=attended / elapsed if elapsed > 0 else 0.0,
            step_s=elapsed, grad_norm=grad_norm, learning_rate=self.learning_rate, skipped=skipped,
            peak_memory_mb=peak_memory_mb(self._policy().loaded.device),
        )


def _on(batch: SequenceBatch, device: torch.device) -> SequenceBatch:
    inputs = {name: value.to(device) for name, value in batch.inputs.items()}
    return SequenceBatch(inputs, batch.completion_mask.to(device), batch.vision_mask.to(device))
