"""The behaviour weights of one-step off-policy rollouts (``rollout_mode = "one_step_off"``).

Step k's replies are sampled with the weights after step k-2: a frozen copy of the policy, taken at the
start of step k-1 (after its rollout, before its update) and used for step k's rollout, which a worker
thread samples during step k-1's update (``rl.step.rollout_ahead``). The first step of a phase, and the
first after a resume, has no older copy: it samples with the policy itself, as a synchronous step does.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace

import torch

from aerorl_ops.config.fields import ConfigError
from aerorl_ops.envs.base import TaskEnv, max_turns
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rl.core.functional import truncated_is_weight
from aerorl_ops.rl.step.sequences import SequenceBatch, completion_logprobs
from aerorl_ops.rl.step.step_parts import response_layout


@dataclass(frozen=True)
class SamplingWeights:
    """What samples a step: ``loaded`` (the policy's, or the frozen copy's), whether it is the copy,
    and the step after which its weights were taken."""

    loaded: LoadedVLM
    off_policy: bool
    behaviour_step: int


class BehaviourWeights:
    """A frozen copy of the policy, refreshed once per step (module docstring)."""

    def __init__(self) -> None:
        self.model: torch.nn.Module | None = None
        self.step: int | None = None  # the step after which ``model``'s weights were taken

    def sampling(self, loaded: LoadedVLM, env: TaskEnv, step: int) -> SamplingWeights:
        """What samples the step that starts after ``step``: the copy when there is one, else the policy."""
        if self.model is None:
            if max_turns(env) > 1:
                raise ConfigError(f'rollout_mode = "one_step_off" cannot train on the multi-turn environment '
                                  f'{env.name!r} yet: set rollout_mode = "sync"')
            return SamplingWeights(loaded, False, step)
        return SamplingWeights(replace(loaded, loaded_model=self.model), True, self.step)

    def take(self, model: torch.nn.Module, step: int) -> None:
        """Copy ``model``'s current weights (those after ``step``) into the frozen copy, made on first use."""
        if self.model is None:
            self.model = copy.deepcopy(model).requires_grad_(False)
        else:
            with torch.no_grad():
                self.model.load_state_dict(model.state_dict())
        self.step = step

    def old_logprob(self, sampling: SamplingWeights, batches: list[SequenceBatch], share, logprob: torch.Tensor,
                    completion: torch.Tensor, training: bool, settings) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The old log-probs of the update's ratio and the truncated importance weight: [B, L] each (the weight
        None). Sampled by the policy at the step's start: ``logprob``, its own. Sampled by this copy: with
        ``rollout_is`` those and verl's truncated weight towards the copy that sampled, else the copy's log-probs
        themselves. ``share``: the step's rows on the ranks; ``completion``: [b, L] this rank's rows."""
        if not sampling.off_policy:
            return logprob, None
        (behaviour,) = share.gather_rollout(response_layout(self.logprobs(batches, training), completion),
                                            device=logprob.device)  # [B, L]
        if settings.rollout_is:
            return logprob, truncated_is_weight(logprob, behaviour, settings.rollout_is_cap)
        return behaviour, None

    def logprobs(self, batches: list[SequenceBatch], training: bool) -> torch.Tensor:
        """The copy's log-probs of every counted token of ``batches``, flat [n], in the policy's mode
        (``training``: dropout as the policy's scoring pass has it)."""
        if self.model is None:
            raise RuntimeError("no behaviour weights have been taken yet")
        self.model.train(training)
        with torch.no_grad():
            return torch.cat([completion_logprobs(self.model, batch).logprobs for batch in batches])  # [n]
