"""Multi-turn episodes sampled by a vLLM engine (``rollout_backend = "vllm"``; ``rl.step.multi_turn``): marked
``vllm``, skipped without vLLM (``make vllm-setup``, then ``make test-vllm``).

easy-VQA with a second try that shows the image again (an image in the later turn, as a Gymnasium grid
shows every turn; ``.venv-vllm`` has no ``gymnasium``), answered by the yes-model: greedy, the engine's
episodes are the policy's own ``generate``'s, token for token, and an RL step samples its episodes from
the engine (each later turn's request with both images) and trains on them.
"""

from __future__ import annotations

import importlib.util

import pytest

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                       reason="vLLM is not installed here: `make vllm-setup`, then `make test-vllm`"),
]

ENGINE = dict(max_model_len=256, engine_args=(("enforce_eager", True), ("kv_cache_memory_bytes", 256 * 2**20),
                                              ("max_num_batched_tokens", 256)))
"""CPU test engine: no compilation, a fixed 256 MiB KV cache, room for a two-turn conversation with two images."""


@pytest.fixture(scope="module")
def env():
    import torch

    from aerorl_ops.envs.easy_vqa import easy_vqa_env
    from aerorl_ops.envs.two_tries import TwoTriesEnv

    torch.set_num_threads(1)
    return TwoTriesEnv(easy_vqa_env("train", 8, 1), show_images_again=True)


def test_greedy_episodes_from_the_engine_are_the_policys_own_and_an_rl_step_trains_on_sampled_ones(
        yes_vlm, yes_model_dir, env, monkeypatch):
    from aerorl_ops.config.training import TrainingSettings
    from aerorl_ops.generation.vllm_engine import MediaLimits
    from aerorl_ops.generation.vllm_sampler import VLLMSampler
    from aerorl_ops.models.entry import GenerationBackend
    from aerorl_ops.rl.runtime.policy import policy_and_reference
    from aerorl_ops.rl.step.multi_turn import episode_limits, sample_episodes
    from aerorl_ops.rl.step.trainer import RLTrainer

    assert episode_limits(yes_vlm, env) == MediaLimits(2, 0)
    hf = sample_episodes(yes_vlm, env, env.items, 4, None)
    assert 1 in hf.turns and 2 in hf.turns  # some first answers are wrong: a second turn, the image again
    limits = episode_limits(yes_vlm, env)
    with VLLMSampler.start(yes_vlm, GenerationBackend("vllm", **ENGINE), limits=limits) as sampler:
        engine = sample_episodes(yes_vlm, env, env.items, 4, None, sampler, seed=0)
    assert engine.replies.token_ids == hf.replies.token_ids and engine.actions == hf.actions
    assert engine.turns == hf.turns and engine.graded.rewards.tolist() == hf.graded.rewards.tolist()

    requests = []  # per sample call: the images of each request
    sample = VLLMSampler.sample
    monkeypatch.setattr(VLLMSampler, "sample", lambda self, prompts, images, *args, **kwargs: (
        requests.append([len(row) for row in images]), sample(self, prompts, images, *args, **kwargs))[1])
    config = TrainingSettings(group_size=2, prompts_per_step=4, max_new_tokens=4, kl_coef=0.0, seed=2,
                              learning_rate=1e-3, rollout_backend="vllm")
    policy, _ = policy_and_reference(str(yes_model_dir), config, device="cpu")
    trainer = RLTrainer(config.resolve(), policy, rollout_engine=GenerationBackend("vllm", **ENGINE))
    try:
        stats = trainer.rl_step(env, [0, 1, 2, 3])
    finally:
        trainer.close_rollouts()
    assert requests[0] == [1] * 8 and any(set(later) == {2} for later in requests[1:])  # the second turn: 2 images
    assert stats.response_length > 0 and stats.reward_mean is not None and stats.loss == stats.loss
