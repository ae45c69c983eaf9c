"""What samples rollout replies in place of the policy's ``generate``: ``generation.vllm_sampler.VLLMSampler``
has it. Single-turn rollouts (``rl.step.rollout``) and multi-turn episodes (``rl.step.multi_turn``) take one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from PIL import Image

from aerorl_ops.eval_runner.episodes import Sampling
from aerorl_ops.generation.vllm_engine import EngineVideo


class ReplySampler(Protocol):
    """``n`` replies to each chat-templated prompt with its images and its video (``videos[i]``: prompt i's frames
    and rate; none: no prompt shows one) (``n[i]`` to prompt i), prompt-major; prompt i seeded with ``seed + i``
    when ``seed`` is given: (token ids up to and including EOS, texts, truncated)."""

    def sample(self, prompts: Sequence[str], images: Sequence[Sequence[Image.Image]], max_new_tokens: int,
               sampling: Sampling | None, n: int | Sequence[int] = 1, seed: int | None = None,
               videos: Sequence[EngineVideo] = ()) -> tuple[list[list[int]], list[str], list[bool]]: ...
