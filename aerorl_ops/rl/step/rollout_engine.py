"""The rollout engine of ``rollout_backend = "vllm"``: a vLLM engine (``generation.vllm_sampler``) started at the
first RL step that uses it, loaded with the policy's current weights before each, and shut down on request
(its memory back before the final evaluations). With ``rollout_backend = "hf"`` there is none: rollouts come
from the policy's own ``generate``.

With several torchrun ranks every rank holds an engine of its own (on a GPU, on the rank's device), started
at the same RL step on every rank, and samples its own micro-batches of the step's prompts
(``rl.runtime.distributed.RolloutShare``); the rollouts are gathered as those of ``generate`` are. Each sync
loads the policy one layer at a time (``generation.policy_weights``: a sharded policy is gathered layer by
layer, every rank together). With ``vllm_sleep_mode`` the engine sleeps (its KV cache freed, its weights in
host memory) from the end of each rollout until the next sync."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aerorl_ops.config.fields import ConfigError
from aerorl_ops.generation.vllm_engine import SINGLE_IMAGE, MediaLimits
from aerorl_ops.models.entry import VLLM_BACKEND, GenerationBackend
from aerorl_ops.models.loading import LoadedVLM

if TYPE_CHECKING:
    from aerorl_ops.generation.vllm_sampler import VLLMSampler  # imported when rollouts use it: vLLM is optional


class RolloutEngine:
    """``settings``: the vLLM engine settings (None: those of the policy's source when it is a vLLM source,
    else vLLM's defaults); ``seed``: the engine's sampling seed; ``sleep_mode``: put it to sleep between a
    rollout and the next sync; ``ranks``: the training ranks, each with an engine of its own."""

    def __init__(self, backend: str, settings: GenerationBackend | None, seed: int, sleep_mode: bool = False,
                 ranks: int = 1) -> None:
        self.backend, self.settings, self.seed = backend, settings, seed
        self.sleep_mode, self.ranks = sleep_mode, ranks
        self.sampler: VLLMSampler | None = None
        self.asleep = False

    def synced(self, loaded: LoadedVLM, limits: MediaLimits = SINGLE_IMAGE) -> VLLMSampler | None:
        """With ``rollout_backend = "vllm"``, the engine (started on first use, for prompts within ``limits``' images
        and videos; woken if asleep) holding ``loaded``'s current weights; None for the policy's
        own ``generate``. With several ranks every rank calls this at once (engines start, and a sharded
        policy is gathered, together)."""
        if self.backend != VLLM_BACKEND:
            return None
        if self.sampler is None:
            self.sampler = self._started(loaded, limits)
        if self.asleep:
            self.sampler.wake_up()
            self.asleep = False
        self.sampler.sync_weights(loaded.model)
        return self.sampler

    def _started(self, loaded: LoadedVLM, limits: MediaLimits) -> VLLMSampler:
        from aerorl_ops.generation.vllm_engine import INSTALL_STEPS, VLLMNotInstalledError
        from aerorl_ops.generation.vllm_sampler import VLLMSampler

        tensor_parallel = (self.settings or loaded.source.backend).tensor_parallel_size or 1
        if self.ranks > 1 and tensor_parallel > 1:
            raise ConfigError(f'rollout_backend = "vllm" on {self.ranks} ranks runs one engine per rank, on the '
                              f"rank's own device, so the engine's tensor_parallel_size must be 1, got "
                              f"{tensor_parallel}: set tensor_parallel_size = 1 in the model's [models.<key>] table")
        try:
            return VLLMSampler.start(loaded, self.settings, seed=self.seed, sleep_mode=self.sleep_mode,
                                     limits=limits)
        except VLLMNotInstalledError as error:
            raise VLLMNotInstalledError(
                f'rollout_backend = "vllm" needs vLLM, which is not installed in this Python environment. '
                f'{INSTALL_STEPS} Or set rollout_backend = "hf" (the policy\'s own generate).') from error

    def sleep(self) -> None:
        """With ``sleep_mode``, free the engine's KV cache and move its weights to host memory until the next
        :meth:`synced` (the update then has the device); else nothing."""
        if self.sleep_mode and self.sampler is not None and not self.asleep:
            self.sampler.sleep()
            self.asleep = True

    def close(self) -> None:
        """Shut down the engine, if one started (its memory back); a later RL step starts another."""
        sampler, self.sampler = self.sampler, None
        self.asleep = False
        if sampler is not None:
            sampler.close()
