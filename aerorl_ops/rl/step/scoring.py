"""Scoring a step's rollout before its updates: the log-probs, entropies and (PPO) values of each reply's
tokens under the policy that will be updated, and the frozen reference's log-probs for the KL term."""

from __future__ import annotations

import torch

from aerorl_ops.rl.runtime.policy import PolicyRuntime, ReferenceRuntime
from aerorl_ops.rl.runtime.value_head import ValueHead
from aerorl_ops.rl.step.sequences import Scoring, SequenceBatch, completion_logprobs, completion_tokens
from aerorl_ops.rl.step.step_parts import RolloutScores, on_device, response_layout


def reference_logprobs(reference: ReferenceRuntime, batch: SequenceBatch, device: torch.device,
                       scoring: Scoring | None = None) -> torch.Tensor:
    """The reference's log-prob of every counted completion token of ``batch``: [n], on ``device`` and out of
    inference mode (usable in autograd graphs). The reference is a quantized copy, scored by ``scoring`` (the
    policy's: ``rl.step.token_scoring``; None: padded), or the LoRA policy under ``model.disable_adapter()``,
    scored as the policy is."""
    with reference.scoring() as model, torch.inference_mode():
        flat = completion_logprobs(model, on_device(batch, reference.device), scoring=scoring).logprobs  # [n]
    return flat.clone().to(device)


def score_rollout(policy: PolicyRuntime, value_head: ValueHead | None, reference: ReferenceRuntime | None,
                  batches: list[SequenceBatch], mask: torch.Tensor, scoring: Scoring | None = None) -> RolloutScores:
    """The log-probs, entropies and (PPO) values of this rank's rollout rows under the policy that sampled
    them (scored as it was prepared to), and the reference's log-probs (None without a reference; scored by
    ``scoring``); mask: [b, L] of those rows, at the global width."""
    model = policy.loaded.model
    logprob, entropy, values, ref = [], [], [], []
    with torch.no_grad():
        for batch in batches:
            tokens = completion_tokens(model, batch)  # [n], [n], [n, H]
            logprob.append(tokens.logprobs)
            entropy.append(tokens.entropy)
            if value_head is not None:
                values.append(value_head(tokens.hidden))  # [n]
            ref.append(reference_logprobs(reference, batch, policy.loaded.device, scoring)
                       if reference is not None else None)

    def layout(parts: list[torch.Tensor | None]) -> torch.Tensor | None:
        return response_layout(torch.cat(parts), mask) if parts and parts[0] is not None else None  # [B, L]

    return RolloutScores(layout(logprob), layout(entropy), layout(ref), layout(values))
