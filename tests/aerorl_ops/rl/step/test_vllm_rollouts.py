"""RL rollouts sampled by a vLLM engine (``rollout_backend = "vllm"``) on the embedded model: marked
``vllm``, skipped without vLLM (``make vllm-setup``, then ``make test-vllm``).

The real ``RLTrainer`` runs a warm-up update and three RL steps at a learning rate that moves
every weight. At RL step k the engine samples with the policy's weights after update k-1 (the
warm-up's for the first), which it did not hold before that step's sync; the rollout's tokens are
the engine's, and its stored log-probs are the policy's own, recomputed. The engine's steps are too
small for a micro-batch's prompts, so without ``vllm_engine.CPU_ENGINE_DEFAULTS`` the seeded
requests would fail on CPU.
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

ENGINE = dict(max_model_len=128, engine_args=(("enforce_eager", True), ("kv_cache_memory_bytes", 256 * 2**20),
                                              ("max_num_batched_tokens", 128)))
"""CPU test engine: no compilation, a fixed 256 MiB KV cache (not a fraction of the shared machine's memory), and
an engine step of at most 128 tokens, less than two prompts (80-85 tokens each): chunked prefill would cut the
second prompt of a micro-batch, which a seeded request cannot survive on CPU (``vllm_engine.CPU_ENGINE_DEFAULTS``)."""
LAYERS = 2  # the embedded model's decoder layers


def visible_pairs(engine: dict, policy: dict) -> list[tuple[str, object, object]]:
    """(name, the engine's tensor, the policy's) for the tensors vLLM's CPU model shows unpacked:
    embeddings, LM head, norms, the patch embedding and the fused q/k/v biases."""
    import torch

    pairs = [("language_model.model.embed_tokens.weight", policy["model.language_model.embed_tokens.weight"]),
             ("language_model.lm_head.weight", policy["lm_head.weight"]),
             ("language_model.model.norm.weight", policy["model.language_model.norm.weight"]),
             ("visual.patch_embed.proj.weight", policy["model.visual.patch_embed.proj.weight"])]
    for layer in range(LAYERS):
        hf, vllm = f"model.language_model.layers.{layer}.", f"language_model.model.layers.{layer}."
        qkv = torch.cat([policy[f"{hf}self_attn.{p}_proj.bias"] for p in "qkv"])
        pairs += [(f"{vllm}self_attn.qkv_proj.bias", qkv),
                  (f"{vllm}input_layernorm.weight", policy[f"{hf}input_layernorm.weight"])]
    return [(name, engine[name], tensor) for name, tensor in pairs]


def engine_holds(engine: dict, policy: dict) -> bool:
    import torch

    return all(torch.equal(mine, theirs) for _, mine, theirs in visible_pairs(engine, policy))


def test_rl_steps_sample_with_the_policy_after_the_previous_update_and_score_with_the_policy(
        tiny_model_dir, monkeypatch):
    import torch

    from aerorl_ops.config.training import TrainingSettings
    from aerorl_ops.envs.registry import make_env
    from aerorl_ops.generation.vllm_sampler import VLLMSampler
    from aerorl_ops.models.entry import GenerationBackend
    from aerorl_ops.models.loading import ModelSource, load_vlm
    from aerorl_ops.rl.runtime.policy import policy_and_reference
    from aerorl_ops.rl.step.sequences import completion_logprobs
    from aerorl_ops.rl.step.trainer import RLTrainer

    torch.set_num_threads(1)
    env = make_env("easy_vqa", split="train", limit=16, seed=1)
    config = TrainingSettings(group_size=2, max_new_tokens=4, learning_rate=1e-2, kl_coef=0.0, grad_accumulation=2,
                          seed=5, rollout_backend="vllm")
    policy, _ = policy_and_reference(str(tiny_model_dir), config, device="cpu")
    model = policy.loaded.model
    trainer = RLTrainer(config.resolve(), policy, rollout_engine=GenerationBackend("vllm", **ENGINE))

    def snapshot() -> dict[str, torch.Tensor]:
        return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}

    synced, sampled, scored = [], [], []  # (engine before, engine after) per sync; replies; (batches, mask, scores)
    sync_weights, sample, score_rollout = VLLMSampler.sync_weights, VLLMSampler.sample, trainer._score_rollout

    def recording_sync(self, policy_model) -> None:
        stale = self.engine.named_parameters()
        sync_weights(self, policy_model)
        synced.append((stale, self.engine.named_parameters()))

    def recording_sample(self, *args, **kwargs):
        sampled.append(sample(self, *args, **kwargs))
        return sampled[-1]

    def recording_score(batches, mask):
        scored.append((batches, mask, score_rollout(batches, mask)))
        return scored[-1][2]

    monkeypatch.setattr(VLLMSampler, "sync_weights", recording_sync)
    monkeypatch.setattr(VLLMSampler, "sample", recording_sample)
    monkeypatch.setattr(trainer, "_score_rollout", recording_score)

    checkpoint = snapshot()  # what the engine starts from
    trainer.supervised_step(env, [0, 1, 2, 3])  # update 0, before the engine exists
    before = []
    for step_prompts in ([0, 1], [2, 3], [4, 5]):
        before.append(snapshot())  # the policy after the previous update
        trainer.rl_step(env, step_prompts)
    engine = trainer.rollouts.sampler.engine
    trainer.close_rollouts()
    assert engine.llm is None  # shut down

    assert len(synced) == 3 and len(sampled) == 6  # one sync per RL step, then its two micro-batches
    for k, (stale, fresh) in enumerate(synced):
        previous = before[k - 1] if k else checkpoint
        assert engine_holds(fresh, before[k])  # RL step k samples with the policy after update k-1 ...
        assert engine_holds(stale, previous) and not engine_holds(fresh, previous)  # ... which it lacked before

    copy = load_vlm(ModelSource(str(tiny_model_dir)), torch.device("cpu"))
    copy.model.train(model.training)
    distinct = set()
    for k, (batches, mask, scores) in enumerate(scored):
        replies = [ids for part in sampled[2 * k: 2 * k + 2] for ids in part.token_ids]
        rollout = [row[row_mask].tolist() for batch in batches
                   for row, row_mask in zip(batch.input_ids, batch.completion_mask, strict=True)]
        assert rollout == replies  # the engine's tokens, scored after the policy's prompt
        distinct.update(tuple(ids) for ids in replies)
        copy.model.load_state_dict(before[k])
        with torch.no_grad():
            recomputed = torch.cat([completion_logprobs(copy.model, batch).logprobs for batch in batches])  # [n]
        assert torch.allclose(scores.logprob[mask.bool()], recomputed, atol=1e-6, rtol=0)  # the policy's own
    assert len(distinct) > 1  # sampled, not one reply throughout
