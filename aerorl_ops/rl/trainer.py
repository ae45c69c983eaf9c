"""``AeroRLTrainer``: the lifecycle of AeroRL's trainer, with steps that really train.

- ``train_step(logits=, labels=, vision_mask=, optimizer=)``: AeroRL's tensor-only quickstart
  (masked cross-entropy over text tokens, one backward, an optional optimizer step).
- ``supervised_step(rows)``: teacher-forced masked CE on ``{"answer": ...}`` targets through the
  fused LM-head loss (vision and prompt tokens excluded) — the warm-up before RL.
- ``rl_step(rows)``: sample ``group_size`` completions per prompt, score them with the reward
  stack, and take one policy-gradient step of the configured algorithm with a KL to the frozen
  quantized reference. Log-probs are computed over completion text tokens only.

Deliberate simplifications: one optimisation pass per rollout (so the importance ratio is 1 and
the clip never binds), no value model, AdamW.
Each step seeds torch from (seed, step), so a resumed run samples exactly what an
uninterrupted one would.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from aerorl_ops.aerorl_compat import resolve_trainer_backend
from aerorl_ops.config.rewards import REWARD_COMPONENT_NAMES
from aerorl_ops.losses import fused_masked_cross_entropy, masked_cross_entropy_loss
from aerorl_ops.rl.algorithms import build_algorithm
from aerorl_ops.rl.config import AeroRLConfig
from aerorl_ops.rl.rollout import collect_rollout, supervised_batch
from aerorl_ops.rl.runtimes import PolicyRuntime, ReferenceRuntime
from aerorl_ops.rl.sequences import SequenceBatch, completion_logprobs, final_hidden_states
from aerorl_ops.rl.stats import StepStats, peak_memory_mb
from aerorl_ops.rows.row import Row


@dataclass
class TrainerState:
    step: int = 0
    started: bool = False
    finished: bool = False


def supervised_labels(batch: SequenceBatch, ignore_index: int = -100) -> tuple[torch.Tensor, torch.Tensor]:
    """Shifted labels (completion tokens only, else ``ignore_index``) and the aligned vision mask."""
    targets = batch.input_ids[:, 1:]  # [B, T-1]
    labels = torch.where(batch.completion_mask[:, 1:], targets, torch.full_like(targets, ignore_index))  # [B, T-1]
    return labels, batch.vision_mask[:, 1:]  # [B, T-1], [B, T-1]


class AeroRLTrainer:
    def __init__(self, config: AeroRLConfig, policy: PolicyRuntime | None = None,
                 reference: ReferenceRuntime | None = None, reward_stack=None) -> None:
        config.validate()
        self.config = config
        self.adapter = resolve_trainer_backend(config.trainer_backend)
        self.policy = policy
        self.reference = reference
        self.reward_stack = reward_stack
        self.algorithm = build_algorithm(config)
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

    def _policy(self) -> PolicyRuntime:
        if self.policy is None:
            raise RuntimeError("this AeroRLTrainer has no policy runtime; build one with wrap_vlm_for_rl(...)")
        return self.policy

    def _seed_step(self) -> None:
        torch.manual_seed(self.config.seed * 1_000_003 + self.state.step)

    def _apply_gradients(self, loss: torch.Tensor) -> float:
        model = self._policy().loaded.model
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), self.config.max_grad_norm)
        self.optimizer.step()
        return float(grad_norm)

    def supervised_step(self, rows: Sequence[Row]) -> StepStats:
        """One masked-CE step on the rows' reference answers (fused LM head, text tokens only)."""
        if not self.state.started:
            self.on_train_start()
        started = time.perf_counter()
        self._seed_step()
        loaded = self._policy().loaded
        batch = supervised_batch(loaded, rows)
        labels, vision = supervised_labels(batch)  # [B, T-1], [B, T-1]
        if not self.config.mask_vision_tokens:
            vision = torch.zeros_like(vision)
        hidden = final_hidden_states(loaded.model, batch)  # [B, T, H]
        loss = fused_masked_cross_entropy(hidden[:, :-1], loaded.model.get_output_embeddings().weight, labels,
                                          vision)  # []
        grad_norm = self._apply_gradients(loss)
        self.state.step += 1
        return self._stats(batch, "warmup", float(loss.detach()), None, None, grad_norm, started, loaded.device)

    def rl_step(self, prompts: Sequence[Row]) -> StepStats:
        """Rollout ``group_size`` samples per prompt, score them, one policy-gradient update."""
        if self.reference is None or self.reward_stack is None:
            raise RuntimeError("rl_step needs a reference runtime and a reward stack")
        if not self.state.started:
            self.on_train_start()
        started = time.perf_counter()
        self._seed_step()
        loaded = self._policy().loaded
        rollout = collect_rollout(loaded, prompts, self.config, self.reward_stack)
        batch = rollout.batch
        mask = batch.completion_mask[:, 1:]  # [B, T-1]
        with torch.no_grad():
            old_logprobs = completion_logprobs(loaded.model, batch, self.config.temperature).logprobs  # [N]
        reference_model = self.reference.loaded.model
        with torch.inference_mode():
            ref_logprobs = completion_logprobs(reference_model, _on(batch, self.reference.device),
                                               self.config.temperature).logprobs.to(old_logprobs.device)  # [N]
        ref_logprobs = ref_logprobs.clone()  # leave inference mode: usable in autograd graphs
        current = completion_logprobs(loaded.model, batch, self.config.temperature)  # [N] with grad
        loss, objective = self.algorithm.loss(current.logprobs, old_logprobs, ref_logprobs,
                                              rollout.rewards.total.to(old_logprobs.device), mask)
        grad_norm = self._apply_gradients(loss)
        self.state.step += 1
        entropy = float(current.entropy.detach().mean()) if current.entropy.numel() else 0.0
        return self._stats(batch, self.config.algorithm, float(loss.detach()), rollout, (objective, entropy),
                           grad_norm, started, loaded.device)

    def _stats(self, batch: SequenceBatch, phase: str, loss: float, rollout, objective, grad_norm: float,
               started: float, device: torch.device) -> StepStats:
        elapsed = time.perf_counter() - started
        attended = float(batch.inputs["attention_mask"].sum())
        counted = float(batch.completion_mask.sum())
        vision = float((batch.vision_mask & batch.inputs["attention_mask"].bool()).sum())
        component = {}
        for name in REWARD_COMPONENT_NAMES:
            values = rollout.rewards.components[name] if rollout is not None else None
            component[f"{name}_mean"] = float(values.mean()) if values is not None else None
            component[f"{name}_std"] = float(values.std(unbiased=False)) if values is not None else None
        reward = rollout.rewards.total if rollout is not None else None
        stats, entropy = objective if objective is not None else (None, None)
        return StepStats(
            step=self.state.step, phase=phase, loss=loss,
            reward_mean=float(reward.mean()) if reward is not None else None,
            reward_std=float(reward.std(unbiased=False)) if reward is not None else None,
            **component,
            kl=stats.kl if stats else None, entropy=entropy,
            clip_fraction=stats.clip_fraction if stats else None,
            response_length=counted / batch.input_ids.shape[0],
            masked_token_fraction=counted / attended if attended else 0.0,
            vision_token_fraction=vision / attended if attended else 0.0,
            tokens_per_s=attended / elapsed if elapsed > 0 else 0.0,
            step_s=elapsed, grad_norm=grad_norm, peak_memory_mb=peak_memory_mb(device),
        )


def _on(batch: SequenceBatch, device: torch.device) -> SequenceBatch:
    inputs = {name: value.to(device) for name, value in batch.inputs.items()}
    return SequenceBatch(inputs, batch.completion_mask.to(device), batch.vision_mask.to(device))
