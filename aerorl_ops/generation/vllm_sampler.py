"""Rollout sampling with a vLLM engine that follows the policy's weights.

The engine starts from the policy's checkpoint; before each rollout the trainer hands it the
policy's current weights (:meth:`VLLMSampler.sync_weights`), so the replies sampled at step k come
from the policy after update k-1. The sampler returns token ids only: the training model runs its
own forward pass over prompt + reply to get the log-probabilities it trains on, never the engine's
(their numerics differ: other kernels, batch composition, dtype).

Replies follow ``rl.step.rollout.generate_replies``: prompts from the model's chat template, every
special or added token but EOS masked out (``suppression``), token ids up to and including the
first EOS, text decoded without special tokens, ``truncated`` when cut at ``max_new_tokens``.

    with VLLMSampler.start(policy) as sampler:            # policy: a LoadedVLM
        for step in range(steps):
            sampler.sync_weights(policy.model)
            replies = sampler.sample(prompts, images, max_new_tokens=4, sampling=sampling, seed=step)
            ...  # policy.model recomputes log-probs of replies.token_ids, then updates
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple, Protocol

import torch
from PIL import Image

from aerorl_ops.generation.batched import eos_token_ids, trim_after_eos
from aerorl_ops.generation.policy_weights import policy_weights
from aerorl_ops.generation.suppression import suppressed_token_ids
from aerorl_ops.generation.vllm_engine import (
    NO_VIDEO,
    SINGLE_IMAGE,
    Engine,
    EngineOutput,
    EngineRequest,
    EngineVideo,
    MediaLimits,
    check_engine_video,
    start_engine,
)
from aerorl_ops.models.entry import VLLM_BACKEND, GenerationBackend
from aerorl_ops.models.loading import LoadedVLM, model_config


class SamplingLike(Protocol):
    """What :meth:`VLLMSampler.sample` reads of a sampling setting (``rl.step.rollout.Sampling`` has it)."""

    temperature: float
    top_k: int
    top_p: float


class SampledReplies(NamedTuple):
    """Prompt-major: the ``n`` replies to prompt 0, then to prompt 1, ... (``rl.step.rollout.Replies``' fields)."""

    token_ids: list[list[int]]  # [B * n] generated ids, up to and including the first EOS
    texts: list[str]  # [B * n] decoded, special tokens removed, stripped
    truncated: list[bool]  # [B * n] cut at max_new_tokens without an EOS


COLOCATED_SHARE = 0.5
"""An engine beside the training model on its GPU, without a ``gpu_memory_utilization`` of its own, takes this
share of the memory free when it starts; the rest stays for the updates' activations and optimizer steps."""


def colocated_memory_utilization(free_bytes: int, total_bytes: int) -> float:
    """vLLM's ``gpu_memory_utilization`` (its budget as a share of the device's total memory) for
    :data:`COLOCATED_SHARE` of ``free_bytes``, rounded down to a hundredth.

    >>> colocated_memory_utilization(free_bytes=60 * 2**30, total_bytes=80 * 2**30)
    0.37
    """
    return int(COLOCATED_SHARE * free_bytes * 100 // total_bytes) / 100


class VLLMSampler:
    """A vLLM engine for rollouts: :meth:`sync_weights` after each update, :meth:`sample` before the next."""

    def __init__(self, engine: Engine, loaded: LoadedVLM) -> None:
        self.engine = engine
        self.tokenizer = loaded.tokenizer
        self.eos_ids = eos_token_ids(loaded)
        vocab_size = model_config(loaded.source).get_text_config().vocab_size
        masked = set(suppressed_token_ids(loaded.tokenizer, self.eos_ids, vocab_size))
        self.allowed_ids = [token for token in range(vocab_size) if token not in masked]
        self.syncs = 0  # how many times the policy's weights were loaded

    @classmethod
    def start(cls, loaded: LoadedVLM, backend: GenerationBackend | None = None, seed: int = 0,
              sleep_mode: bool = False, limits: MediaLimits = SINGLE_IMAGE) -> VLLMSampler:
        """An engine for ``loaded``'s checkpoint (``backend``'s engine settings; default: the source's own
        when it is a vLLM source, else vLLM's defaults), in ``loaded``'s dtype, beside it on its device: on
        a GPU, settings without ``gpu_memory_utilization`` take :func:`colocated_memory_utilization` of the
        memory free now. With ``sleep_mode`` it can :meth:`sleep` (CUDA only). A prompt may show up to
        ``limits``' images and videos; a family whose video vLLM cannot take is refused first
        (``vllm_engine.check_engine_video``)."""
        check_engine_video(loaded.processor, loaded.source.label, limits)
        source = loaded.source
        if backend is None:
            backend = source.backend if source.backend.name == VLLM_BACKEND else GenerationBackend(VLLM_BACKEND)
        if loaded.device.type == "cuda" and backend.gpu_memory_utilization is None:
            free, total = torch.cuda.mem_get_info(loaded.device)
            backend = replace(backend, gpu_memory_utilization=colocated_memory_utilization(free, total))
        engine_source = replace(source, backend=backend)
        return cls(start_engine(engine_source, loaded.dtype, seed, sleep_mode=sleep_mode, limits=limits), loaded)

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Load ``model``'s current weights into the engine, one layer at a time (``policy_weights``: a
        sharded model is gathered layer by layer, on every rank at once), and drop caches computed with
        the old ones."""
        with torch.no_grad():
            self.engine.load_weights(policy_weights(model))
        self.syncs += 1

    def sleep(self) -> None:
        """Free the engine's KV cache and move its weights off the GPU until :meth:`wake_up` (an engine
        started with ``sleep_mode``)."""
        self.engine.sleep()

    def wake_up(self) -> None:
        self.engine.wake_up()

    def sample(self, prompts: Sequence[str], images: Sequence[Sequence[Image.Image]], max_new_tokens: int,
               sampling: SamplingLike | None, n: int | Sequence[int] = 1, seed: int | None = None,
               videos: Sequence[EngineVideo] = ()) -> SampledReplies:
        """``n`` replies to each chat-templated prompt with its images (``n[i]`` to prompt i when a
        sequence), prompt-major; greedy when ``sampling`` is None. ``videos``: each prompt's video (none: no
        prompt shows one).

        With ``seed``, prompt i is sampled with seed ``seed + i``: the same seed and prompts give the
        same replies whatever else the engine runs.
        """
        outputs = self._run(prompts, images, videos, max_new_tokens, sampling, n, seed, logprobs=False)
        return self._replies(outputs, max_new_tokens)

    def sample_with_logprobs(self, prompts: Sequence[str], images: Sequence[Sequence[Image.Image]],
                             max_new_tokens: int, sampling: SamplingLike | None, n: int | Sequence[int] = 1,
                             seed: int | None = None,
                             videos: Sequence[EngineVideo] = ()) -> tuple[SampledReplies, list[list[float]]]:
        """:meth:`sample`, plus the engine's log-probability of each reply token: for checks against
        the policy's own, never for training."""
        outputs = self._run(prompts, images, videos, max_new_tokens, sampling, n, seed, logprobs=True)
        replies = self._replies(outputs, max_new_tokens)
        logprobs = [list(row) for output in outputs for row in output.logprobs]
        return replies, [row[: len(ids)] for row, ids in zip(logprobs, replies.token_ids, strict=True)]

    def _run(self, prompts: Sequence[str], images: Sequence[Sequence[Image.Image]], videos: Sequence[EngineVideo],
             max_new_tokens: int, sampling: SamplingLike | None, n: int | Sequence[int], seed: int | None,
             logprobs: bool) -> list[EngineOutput]:
        requests = [EngineRequest(prompt, tuple(row_images), video)
                    for prompt, row_images, video in zip(prompts, images, videos or [NO_VIDEO] * len(prompts),
                                                         strict=True)]
        counts = [n] * len(prompts) if isinstance(n, int) else list(n)
        if len(counts) != len(prompts):
            raise ValueError(f"n has {len(counts)} counts for {len(prompts)} prompts")
        params = [self._params(max_new_tokens, sampling, count, None if seed is None else seed + i, logprobs)
                  for i, count in enumerate(counts)]
        return self.engine.run(requests, params)

    def _params(self, max_new_tokens: int, sampling: SamplingLike | None, n: int, seed: int | None, logprobs: bool):
        common = dict(max_tokens=max_new_tokens, n=n, seed=seed, stop_token_ids=self.eos_ids,
                      allowed_token_ids=self.allowed_ids, logprobs=logprobs)
        if sampling is None:
            return self.engine.sampling_params(**common)
        return self.engine.sampling_params(temperature=sampling.temperature, top_k=sampling.top_k,
                                           top_p=sampling.top_p, **common)

    def _replies(self, outputs: Sequence[EngineOutput], max_new_tokens: int) -> SampledReplies:
        ids = [trim_after_eos(list(tokens), self.eos_ids) for output in outputs for tokens in output.token_ids]
        texts = [self.tokenizer.decode(row, skip_special_tokens=True).strip() for row in ids]
        truncated = [len(row) >= max_new_tokens and not (row and row[-1] in self.eos_ids) for row in ids]
        return SampledReplies(ids, texts, truncated)

    def close(self) -> None:
        self.engine.close()

    def __enter__(self) -> VLLMSampler:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

