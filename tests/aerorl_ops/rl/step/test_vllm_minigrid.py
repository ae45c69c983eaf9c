"""Multi-turn MiniGrid episodes (``kind = "gymnasium"``, MiniGrid-Empty-5x5-v0 with left / right / forward)
sampled by a vLLM engine (``rollout_backend = "vllm"``): marked ``vllm``, skipped without vLLM or minigrid
(``make vllm-setup`` installs both, then ``make test-vllm``).

The yes-model answers "yes" every turn, so every episode runs its three turns, each a rendered frame and a
not-an-action line: the engine's episodes are the policy's own ``generate``'s, token for token, with an image
in every request of every turn, and the environment's outcome (no step taken, three parse failures) is the same.
"""

from __future__ import annotations

import importlib.util

import pytest

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                       reason="vLLM is not installed here: `make vllm-setup`, then `make test-vllm`"),
    pytest.mark.skipif(importlib.util.find_spec("minigrid") is None,
                       reason="minigrid is not installed here: `make vllm-setup` installs the envs extra"),
]

ENGINE = dict(max_model_len=1024, engine_args=(("enforce_eager", True), ("kv_cache_memory_bytes", 256 * 2**20),
                                               ("max_num_batched_tokens", 1024)))
"""CPU test engine: no compilation, a fixed 256 MiB KV cache, room for three turns with a frame each."""


@pytest.fixture(scope="module")
def env():
    import torch

    from aerorl_ops.envs.registry import make_env

    torch.set_num_threads(1)
    return make_env("gymnasium", env_id="MiniGrid-Empty-5x5-v0", actions=["left", "right", "forward"], split="train",
                    limit=4, max_turns=3, env_kwargs={"tile_size": 8})


def test_greedy_minigrid_episodes_from_the_engine_are_the_policys_own_with_a_frame_every_turn(
        yes_vlm, env, monkeypatch):
    from aerorl_ops.generation.vllm_engine import MediaLimits
    from aerorl_ops.generation.vllm_sampler import VLLMSampler
    from aerorl_ops.models.entry import GenerationBackend
    from aerorl_ops.rl.step.multi_turn import episode_limits, sample_episodes

    assert episode_limits(yes_vlm, env) == MediaLimits(3, 0)
    hf = sample_episodes(yes_vlm, env, env.items, 4, None)
    requests = []  # per sample call: the images of each request
    sample = VLLMSampler.sample
    monkeypatch.setattr(VLLMSampler, "sample", lambda self, prompts, images, *args, **kwargs: (
        requests.append([len(row) for row in images]), sample(self, prompts, images, *args, **kwargs))[1])
    limits = episode_limits(yes_vlm, env)
    with VLLMSampler.start(yes_vlm, GenerationBackend("vllm", **ENGINE), limits=limits) as sampler:
        engine = sample_episodes(yes_vlm, env, env.items, 4, None, sampler, seed=0)
    assert engine.replies.token_ids == hf.replies.token_ids and engine.actions == hf.actions
    assert engine.turns == hf.turns == [3] * 4
    assert engine.graded.rewards.tolist() == hf.graded.rewards.tolist() == [0.0] * 4
    assert engine.graded.components["parse_failures"].tolist() == [3.0] * 4
    assert engine.graded.components["env_steps"].tolist() == [0.0] * 4
    assert requests == [[1] * 4, [2] * 4, [3] * 4]  # turn k's request holds the k frames shown so far
