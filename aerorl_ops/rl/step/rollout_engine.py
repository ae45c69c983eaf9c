"""The rollout engine of ``rollout_backend = "vllm"``: a vLLM engine (``generation.vllm_sampler``) started at the
first RL step that uses it, loaded with the policy's current weights before each, and shut down on request
(its memory back before the final evaluations). With ``rollout_backend = "hf"`` there is none: rollouts come
from the policy's own ``generate``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aerorl_ops.models.entry import VLLM_BACKEND, GenerationBackend
from aerorl_ops.models.loading import LoadedVLM

if TYPE_CHECKING:
    from aerorl_ops.generation.vllm_sampler import VLLMSampler  # imported when rollouts use it: vLLM is optional


class RolloutEngine:
    """``settings``: the vLLM engine settings (None: those of the policy's source when it is a vLLM source,
    else vLLM's defaults); ``seed``: the engine's sampling seed."""

    def __init__(self, backend: str, settings: GenerationBackend | None, seed: int) -> None:
        self.backend, self.settings, self.seed = backend, settings, seed
        self.sampler: VLLMSampler | None = None

    def synced(self, loaded: LoadedVLM) -> VLLMSampler | None:
        """With ``rollout_backend = "vllm"``, the engine (started on first use) holding ``loaded``'s current
        weights; None for the policy's own ``generate``."""
        if self.backend != VLLM_BACKEND:
            return None
        if self.sampler is None:
            from aerorl_ops.generation.vllm_engine import INSTALL_STEPS, VLLMNotInstalledError
            from aerorl_ops.generation.vllm_sampler import VLLMSampler

            try:
                self.sampler = VLLMSampler.start(loaded, self.settings, seed=self.seed)
            except VLLMNotInstalledError as error:
                raise VLLMNotInstalledError(
                    f'rollout_backend = "vllm" needs vLLM, which is not installed in this Python environment. '
                    f'{INSTALL_STEPS} Or set rollout_backend = "hf" (the policy\'s own generate).') from error
        self.sampler.sync_weights(loaded.model)
        return self.sampler

    def close(self) -> None:
        """Shut down the engine, if one started (its memory back); a later RL step starts another."""
        sampler, self.sampler = self.sampler, None
        if sampler is not None:
            sampler.close()
