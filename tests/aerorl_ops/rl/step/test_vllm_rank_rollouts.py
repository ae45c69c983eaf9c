"""vLLM rollouts on two gloo ranks (``rollout_backend = "vllm"``, ``nproc_per_node = 2``), each rank with an
engine of its own: marked ``vllm``, skipped without vLLM (``make vllm-setup``, then ``make test-vllm``).

Two spawned ranks run, one after the other in the same process group, a trainer with ``sharding = "none"``
(every rank holds the policy) and one with ``sharding = "fsdp2"`` (each holds half; the sync gathers it
layer by layer, both ranks together). Before each trainer's RL step (``top_k = 1``, so the engine's sampled
replies are its greedy ones) every weight of the policy moves, as an update would (a warm-up update of this
tiny model makes every greedy reply a bare EOS, which would prove little). At that step, on each rank: the
engine started with the checkpoint's weights and holds the policy's moved ones after the sync; it was asked
for that rank's own micro-batch only (one prompt's group), and its replies are exactly the policy's own greedy
replies through transformers on that rank, which differ from the checkpoint's and from the other rank's.
Closing the first engine leaves the ranks' process group to the second trainer. The fsdp2 sync records the
bytes of gathered tensors alive at once (what the engine had not yet consumed) against the whole policy's.

Cost on the shared 2-core machine: 75-95 s for the module (one spawn of two ranks, four engine starts in
all: two on each rank, the ranks' starting together).
"""

from __future__ import annotations

import importlib.util
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                       reason="vLLM is not installed here: `make vllm-setup`, then `make test-vllm`"),
]

PROMPTS = [0, 1]  # one prompt's group per micro-batch, one micro-batch per rank
SHARDINGS = ("none", "fsdp2")


class Recorded:
    """What one rank's engine did at the RL step: its visible weights before and after each sync, the
    prompts it was asked and its replies, and (tracked) the bytes of synced tensors alive at once."""

    def __init__(self) -> None:
        self.syncs: list[tuple[dict, dict]] = []
        self.prompts: list[str] = []
        self.replies: list[list[int]] = []
        self.peak_bytes = self.synced_bytes = 0


@contextmanager
def recording(recorded: Recorded) -> Iterator[None]:
    """Inside, the sampler's sync and sample, and the weights it syncs, fill ``recorded``."""
    from aerorl_ops.generation import vllm_sampler
    from aerorl_ops.generation.vllm_sampler import VLLMSampler

    sync, sample, weights = VLLMSampler.sync_weights, VLLMSampler.sample, vllm_sampler.policy_weights

    def recording_sync(self, model) -> None:
        stale = self.engine.named_parameters()
        sync(self, model)
        recorded.syncs.append((stale, self.engine.named_parameters()))

    def recording_sample(self, prompts, *args, **kwargs):
        replies = sample(self, prompts, *args, **kwargs)
        recorded.prompts += list(prompts)
        recorded.replies += replies.token_ids
        return replies

    def tracked_weights(model):
        alive: list[tuple[weakref.ref, int]] = []
        for name, tensor in weights(model):
            size = tensor.numel() * tensor.element_size()
            alive.append((weakref.ref(tensor), size))
            recorded.synced_bytes += size
            yield name, tensor
            del tensor
            recorded.peak_bytes = max(recorded.peak_bytes, sum(s for ref, s in alive if ref() is not None))

    VLLMSampler.sync_weights, VLLMSampler.sample = recording_sync, recording_sample
    vllm_sampler.policy_weights = tracked_weights
    try:
        yield
    finally:
        VLLMSampler.sync_weights, VLLMSampler.sample, vllm_sampler.policy_weights = sync, sample, weights


def moved(model, scale: float = 0.02) -> None:
    """Move every weight as an update would (seeded noise, the same on every rank): the engine's checkpoint goes
    stale, and the greedy replies change (0.02 changes those of both prompts, to two different ones)."""
    import torch

    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter), alpha=scale)


def rank_step(dp, model_dir: str, sharding: str) -> dict:
    """One RL step sampled by this rank's engine after the policy moved (see the module docstring)."""
    from aerorl_ops.config.training import TrainingSettings
    from aerorl_ops.envs.registry import make_env
    from aerorl_ops.models.entry import GenerationBackend
    from aerorl_ops.rl.runtime.policy import policy_and_reference
    from aerorl_ops.rl.step.prompts import drawn_prompts
    from aerorl_ops.rl.step.rollout import sample_parts
    from aerorl_ops.rl.step.trainer import RLTrainer
    from tests.aerorl_ops.rl.step.test_vllm_rollouts import ENGINE, engine_holds

    settings = TrainingSettings(group_size=2, max_new_tokens=3, learning_rate=1e-2, kl_coef=0.0, top_k=1, seed=5,
                                grad_accumulation=2, nproc_per_node=2, sharding=sharding, rollout_backend="vllm")
    env = make_env("easy_vqa", split="train", limit=8, seed=1)
    policy, _ = policy_and_reference(model_dir, settings, device="cpu")
    model = policy.loaded.model

    def state() -> dict:
        return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}

    rows = drawn_prompts(env, [index for index in PROMPTS for _ in range(settings.group_size)])
    parts = dp.share_rollout(len(rows), settings.grad_accumulation, 1).items(rows)  # this rank's rows

    def greedy() -> list[list[int]]:  # the policy's own, through transformers (not sharded until the first step)
        return sample_parts(policy.loaded, env, parts, settings.max_new_tokens, None).replies.token_ids

    checkpoint, checkpoint_greedy = state(), greedy()
    moved(model)
    current, current_greedy = state(), greedy()
    trainer = RLTrainer(settings.resolve(), policy, dp=dp, rollout_engine=GenerationBackend("vllm", **ENGINE))
    recorded = Recorded()
    with recording(recorded):
        trainer.rl_step(env, PROMPTS)  # the policy sharded here (fsdp2); its engine started, then synced
    trainer.close_rollouts()  # the process group stays: the next trainer's collectives run in it
    ((stale, fresh),) = recorded.syncs
    return {"parts": [[prompt.group for prompt in part] for part in parts], "greedy": current_greedy,
            "checkpoint_greedy": checkpoint_greedy, "replies": recorded.replies, "prompts": len(recorded.prompts),
            "stale_is_checkpoint": engine_holds(stale, checkpoint), "fresh_is_policy": engine_holds(fresh, current),
            "stale_is_policy": engine_holds(stale, current), "peak_bytes": recorded.peak_bytes,
            "synced_bytes": recorded.synced_bytes}


def two_ranks(rank: int, port: int, model_dir: str, out: str) -> None:
    import torch

    from tests.aerorl_ops.rl.runtime.test_distributed import join

    torch.set_num_threads(1)
    dp = join(rank, 2, port, timeout_s=600)
    try:
        torch.save({sharding: rank_step(dp, model_dir, sharding) for sharding in SHARDINGS}, Path(out) / f"{rank}.pt")
    finally:
        dp.close()


@pytest.fixture(scope="module")
def ranks(tiny_model_dir, tmp_path_factory) -> list[dict]:
    import torch
    import torch.multiprocessing as mp

    from tests.aerorl_ops.rl.runtime.test_distributed import free_port

    out = tmp_path_factory.mktemp("vllm_ranks")
    mp.spawn(two_ranks, args=(free_port(), str(tiny_model_dir), str(out)), nprocs=2)
    return [torch.load(out / f"{rank}.pt", weights_only=False) for rank in range(2)]


@pytest.mark.parametrize("sharding", SHARDINGS)
def test_each_rank_samples_its_own_share_greedily_with_the_policys_current_weights(ranks, sharding):
    for rank, result in enumerate(ranks):
        step = result[sharding]
        assert step["parts"] == [[PROMPTS[rank]] * 2]  # rank r samples prompt r's group, nothing else
        assert step["prompts"] == 1  # asked once, for its two replies
        assert step["stale_is_checkpoint"] and not step["stale_is_policy"]  # started from the checkpoint ...
        assert step["fresh_is_policy"]  # ... it holds the moved policy after the sync
        assert step["replies"] == step["greedy"]  # the engine's replies are the policy's own greedy ones ...
        assert step["greedy"] != step["checkpoint_greedy"]  # ... which the checkpoint's are not
    assert ranks[0][sharding]["greedy"] != ranks[1][sharding]["greedy"]  # each rank its own prompt's replies


def test_a_sharded_sync_holds_one_layer_of_gathered_weights_not_the_model(ranks):
    for result in ranks:
        step = result["fsdp2"]
        print(f"fsdp2 sync: at most {step['peak_bytes']:,} bytes of gathered weights alive at once, of "
              f"{step['synced_bytes']:,} synced")
        assert 0 < step["peak_bytes"] < step["synced_bytes"] / 4
