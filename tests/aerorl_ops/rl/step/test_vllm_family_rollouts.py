"""RL rollouts sampled by a vLLM engine (``rollout_backend = "vllm"``) on a tiny checkpoint of every VLM
family: marked ``vllm``, skipped without vLLM (``make test-vllm``).

One RL step per family with ``top_k = 1``, so the engine's sampled replies are the greedy ones: after the
step's weight sync the engine holds the policy's weights (no update has happened yet), so its replies to
the step's prompts and images must be exactly the policy's own greedy replies through transformers, and
the step's losses are finite. ``tests/aerorl_ops/rl/step/test_vllm_rollouts.py`` checks the weight sync across
updates on the embedded model; this checks that each family's prompts and images reach the engine.
"""

from __future__ import annotations

import importlib.util

import pytest

from aerorl_ops.envs.base import items_at
from aerorl_ops.models.tiny_families import VLLM_CHECKED

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                       reason="vLLM is not installed here: `make vllm-setup`, then `make test-vllm`"),
]

ENGINE_ARGS = (("enforce_eager", True), ("kv_cache_memory_bytes", 256 * 2**20))
"""CPU test engine: no compilation and a fixed 256 MiB KV cache (not a fraction of the machine's memory)."""


@pytest.mark.parametrize("name", VLLM_CHECKED)
def test_a_vllm_rollout_samples_each_familys_prompts_and_images_with_the_policys_weights(tiny_family_dir, name,
                                                                                       monkeypatch):
    import torch

    from aerorl_ops.config.training import TrainingSettings
    from aerorl_ops.envs.registry import make_env
    from aerorl_ops.eval_runner.episodes import generate_replies, observe_all
    from aerorl_ops.eval_runner.replies import encode_observations
    from aerorl_ops.generation.vllm_sampler import VLLMSampler
    from aerorl_ops.models.entry import GenerationBackend
    from aerorl_ops.rl.runtime.policy import policy_and_reference
    from aerorl_ops.rl.step.trainer import RLTrainer

    torch.set_num_threads(1)
    env = make_env("easy_vqa", split="train", limit=8, seed=1)
    settings = TrainingSettings(group_size=2, max_new_tokens=3, kl_coef=0.0, learning_rate=1e-2, top_k=1, seed=5,
                                rollout_backend="vllm")
    policy, _ = policy_and_reference(str(tiny_family_dir(name)), settings, device="cpu")
    loaded = policy.loaded
    prompts = [0, 1]
    rows = [index for index in prompts for _ in range(settings.group_size)]
    observations = observe_all(env, items_at(env, rows))
    greedy = generate_replies(loaded, encode_observations(loaded, observations), settings.max_new_tokens,
                              None).token_ids  # the policy's own, before any update
    sampled, sample = [], VLLMSampler.sample

    def recording_sample(self, *args, **kwargs):
        sampled.append(sample(self, *args, **kwargs))
        return sampled[-1]

    monkeypatch.setattr(VLLMSampler, "sample", recording_sample)
    trainer = RLTrainer(settings.resolve(), policy, rollout_engine=GenerationBackend("vllm", engine_args=ENGINE_ARGS))
    try:
        stats = trainer.rl_step(env, prompts)
    finally:
        trainer.close_rollouts()
    assert [ids for part in sampled for ids in part[0]] == greedy
    assert torch.isfinite(torch.tensor(stats.loss)) and stats.response_length > 0
