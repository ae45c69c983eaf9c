"""``rollout_backend``: who samples the RL rollouts, without vLLM installed.

A stand-in for ``VLLMSampler`` (``generation.vllm_sampler``) shows the trainer's side of the
contract: the sampler gets the policy's weights before every rollout (those after the previous
update, the warm-up's included), the prompts of the transformers path and a distinct seed per
prompt, and the rollout's log-probs are the policy's own. The real engine is checked in
``test_vllm_rollouts.py`` (vllm-marked).
"""

from __future__ import annotations

import dataclasses
import sys

import pytest
import torch

from aerorl_ops.config.fields import ConfigError, parse_section
from aerorl_ops.config.training import TRAINING_DEFAULTS, TrainingSettings
from aerorl_ops.envs.base import items_at
from aerorl_ops.envs.registry import make_env
from aerorl_ops.eval_runner.episodes import observe_all
from aerorl_ops.eval_runner.replies import observation_prompts
from aerorl_ops.generation.batched import eos_token_ids
from aerorl_ops.generation.vllm_engine import SINGLE_IMAGE, MediaLimits, VLLMNotInstalledError
from aerorl_ops.generation.vllm_sampler import VLLMSampler
from aerorl_ops.models.entry import GenerationBackend
from aerorl_ops.models.loading import ModelSource, load_vlm
from aerorl_ops.rl.run.phases import run_training
from aerorl_ops.rl.runtime.distributed import DataParallel
from aerorl_ops.rl.runtime.policy import policy_and_reference
from aerorl_ops.rl.step.rollout_engine import RolloutEngine
from aerorl_ops.rl.step.sequences import completion_logprobs
from aerorl_ops.rl.step.trainer import RLTrainer

CONFIG = TrainingSettings(group_size=2, max_new_tokens=4, learning_rate=1e-2, kl_coef=0.0, grad_accumulation=2,
                          seed=5, rollout_backend="vllm")


@pytest.fixture(scope="module")
def env():
    torch.set_num_threads(1)
    return make_env("easy_vqa", split="train", limit=16, seed=1)


def snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


def same_weights(left: dict[str, torch.Tensor], right: dict[str, torch.Tensor]) -> bool:
    return left.keys() == right.keys() and all(torch.equal(left[name], right[name]) for name in left)


class StandInSampler:
    """Replies "red" + EOS to every prompt; records the weights it was synced with and what it was asked."""

    def __init__(self, loaded, fail: bool = False) -> None:
        self.reply = loaded.tokenizer.encode("red", add_special_tokens=False) + [eos_token_ids(loaded)[0]]
        self.fail = fail
        self.synced: list[dict[str, torch.Tensor]] = []
        self.calls: list[tuple[list[str], list[int], int | None, int]] = []  # prompts, images, seed, syncs so far
        self.counts: list[list[int]] = []  # replies asked of each prompt, per call
        self.events: list[str] = []  # sync, sleep, wake_up in order
        self.closed = False

    def sync_weights(self, model: torch.nn.Module) -> None:
        self.synced.append(snapshot(model))
        self.events.append("sync")

    def sample(self, prompts, images, max_new_tokens, sampling, n=1, seed=None, videos=()):
        if self.fail:
            raise RuntimeError("the engine fell over")
        self.calls.append((list(prompts), [len(row) for row in images], seed, len(self.synced)))
        self.counts.append([n] * len(prompts) if isinstance(n, int) else list(n))
        replies = sum(self.counts[-1])  # prompt-major: n[i] replies to prompt i
        return [list(self.reply) for _ in range(replies)], ["red"] * replies, [False] * replies

    def sleep(self) -> None:
        self.events.append("sleep")

    def wake_up(self) -> None:
        self.events.append("wake_up")

    def close(self) -> None:
        self.closed = True


class StandIns:
    """What ``VLLMSampler.start`` started: a new ``StandInSampler`` each time (failing to sample if ``fail``)."""

    def __init__(self) -> None:
        self.started: list[StandInSampler] = []
        self.limits: list[MediaLimits] = []  # the images and videos per prompt each engine was started for
        self.fail = False

    def start(self, loaded, backend=None, seed=0, sleep_mode=False, limits=SINGLE_IMAGE) -> StandInSampler:
        self.started.append(StandInSampler(loaded, self.fail))
        self.limits.append(limits)
        return self.started[-1]


@pytest.fixture
def stand_ins(monkeypatch) -> StandIns:
    made = StandIns()
    monkeypatch.setattr(VLLMSampler, "start", classmethod(lambda cls, *args, **kwargs: made.start(*args, **kwargs)))
    return made


def test_vllm_rollouts_without_vllm_fail_at_the_first_rl_step_saying_how_to_install(tiny_model_dir, env,
                                                                                      monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # `import vllm` raises ImportError, installed or not
    policy, _ = policy_and_reference(str(tiny_model_dir), CONFIG, device="cpu")
    trainer = RLTrainer(CONFIG.resolve(), policy)
    trainer.supervised_step(env, [0, 1])  # supervised steps never need the engine
    with pytest.raises(VLLMNotInstalledError) as raised:
        trainer.rl_step(env, [0, 1])
    message = str(raised.value)
    assert message.startswith('rollout_backend = "vllm" needs vLLM')
    assert "make vllm-setup" in message and 'pip install -e ".[vllm]"' in message
    assert 'set rollout_backend = "hf"' in message
    assert trainer.state.step == 1  # nothing was sampled or updated


def test_vllm_rollouts_run_on_several_ranks_and_sleep_mode_is_refused_on_cpu_in_one_line():
    settings = dataclasses.replace(TRAINING_DEFAULTS, rollout_backend="vllm", nproc_per_node=2, grad_accumulation=2)
    assert settings.check_rules("run") is settings  # an engine per rank
    assert RLTrainer(settings.resolve(), dp=DataParallel(rank=0, world_size=2)).rollouts.ranks == 2
    with pytest.raises(ConfigError) as refused:
        dataclasses.replace(TRAINING_DEFAULTS, vllm_sleep_mode=True).check_rules("run")
    assert str(refused.value) == ("run: vllm_sleep_mode = true puts the vLLM rollout engine to sleep during the "
                                  "update, but rollout_backend = 'hf' has none: set rollout_backend = \"vllm\", or "
                                  "vllm_sleep_mode = false")
    asleep = dataclasses.replace(settings, vllm_sleep_mode=True)
    assert asleep.check_rules("run") is asleep  # the device is known where the trainer starts
    with pytest.raises(ConfigError) as refused:
        RLTrainer(asleep.resolve(), dp=DataParallel(rank=0, world_size=2))
    assert str(refused.value) == ("vllm_sleep_mode = true needs a CUDA device (vLLM's sleep mode frees the engine's "
                                  "memory through its CUDA memory pool), but the policy is on cpu: set "
                                  "vllm_sleep_mode = false")
    with pytest.raises(ValueError, match=r"'training.rollout_backend' must be one of \('hf', 'vllm'\), got 'sglang'"):
        parse_section(TrainingSettings, "run", "training", {"rollout_backend": "sglang"})


@pytest.mark.parametrize(("sleep_mode", "events"), [(True, ["sync", "sleep", "wake_up", "sync", "sleep"]),
                                                     (False, ["sync", "sync"])])
def test_with_sleep_mode_the_engine_sleeps_from_each_rollout_to_the_next_sync(tiny_vlm, stand_ins, sleep_mode,
                                                                             events):
    engine = RolloutEngine("vllm", None, seed=0, sleep_mode=sleep_mode)
    for _ in range(2):  # two RL steps: a sync, the rollout, then (sleep mode) asleep through the update
        engine.synced(tiny_vlm)
        engine.sleep()
    engine.sleep()  # asleep already: nothing more
    engine.close()
    (sampler,) = stand_ins.started
    assert sampler.events == events and sampler.closed


def test_an_engine_per_rank_cannot_be_tensor_parallel(tiny_vlm, stand_ins):
    engine = RolloutEngine("vllm", GenerationBackend("vllm", tensor_parallel_size=2), seed=0, ranks=2)
    with pytest.raises(ConfigError) as refused:
        engine.synced(tiny_vlm)
    assert str(refused.value) == ('rollout_backend = "vllm" on 2 ranks runs one engine per rank, on the rank\'s own '
                                  "device, so the engine's tensor_parallel_size must be 1, got 2: set "
                                  "tensor_parallel_size = 1 in the model's [models.<key>] table")
    assert not stand_ins.started
    RolloutEngine("vllm", GenerationBackend("vllm", tensor_parallel_size=2), seed=0).synced(tiny_vlm)  # one rank
    assert len(stand_ins.started) == 1


def test_the_sampler_gets_the_policy_after_the_last_update_and_the_policy_scores_its_replies(
        tiny_model_dir, env, stand_ins, monkeypatch):
    policy, _ = policy_and_reference(str(tiny_model_dir), CONFIG, device="cpu")
    loaded = policy.loaded
    trainer = RLTrainer(CONFIG.resolve(), policy)
    checkpoint = snapshot(loaded.model)
    trainer.supervised_step(env, [0, 1, 2, 3])  # a warm-up update: the first rollout must see it
    scored = []
    score_rollout = trainer._score_rollout

    def recording(batches, mask):
        scores = score_rollout(batches, mask)
        scored.append((batches, mask, scores))
        return scores

    monkeypatch.setattr(trainer, "_score_rollout", recording)
    before, prompts = [], [[0, 1], [2, 3], [4, 5]]
    for step_prompts in prompts:
        before.append(snapshot(loaded.model))
        trainer.rl_step(env, step_prompts)
    trainer.close_rollouts()

    (sampler,) = stand_ins.started  # started once, at the first RL step
    assert stand_ins.limits == [MediaLimits(1, 0)]  # for the training items' largest image count: one each
    assert sampler.closed and trainer.rollouts.sampler is None
    assert len(sampler.synced) == 3
    for k, weights in enumerate(sampler.synced):
        assert same_weights(weights, before[k])  # the policy after update k-1 (the warm-up's, for k = 0)
        assert not same_weights(weights, before[k - 1] if k else checkpoint)  # ... which the update changed
    # two micro-batches per step (one prompt's group each), each sampled after that step's sync, with the
    # transformers path's prompt asked once for its group_size replies (its image sent once), and a distinct
    # seed per prompt (a sampler seeds prompt i with seed + i)
    assert [syncs for *_, syncs in sampler.calls] == [1, 1, 2, 2, 3, 3]
    assert sampler.counts == [[CONFIG.group_size]] * 6
    for k, step_prompts in enumerate(prompts):
        calls = sampler.calls[2 * k: 2 * k + 2]
        expected = observation_prompts(loaded, observe_all(env, items_at(env, step_prompts)))
        assert [prompt for call in calls for prompt in call[0]] == expected
        assert all(images == [1] for _, images, _, _ in calls)
        seeds = [seed + i for texts, _, seed, _ in calls for i in range(len(texts))]
        assert len(set(seeds)) == len(seeds) == 2

    copy = load_vlm(ModelSource(str(tiny_model_dir)), torch.device("cpu"))
    copy.model.train(loaded.model.training)
    for k, (batches, mask, scores) in enumerate(scored):
        copy.model.load_state_dict(before[k])
        for batch in batches:  # the sampler's tokens after the prompt, EOS included
            assert [row[row_mask].tolist() for row, row_mask in zip(batch.input_ids, batch.completion_mask,
                                                                     strict=True)] == [sampler.reply] * 2
        with torch.no_grad():
            recomputed = torch.cat([completion_logprobs(copy.model, batch).logprobs for batch in batches])  # [n]
        assert torch.allclose(scores.logprob[mask.bool()], recomputed, atol=1e-6, rtol=0)


def test_a_training_run_shuts_the_engine_down_when_rl_fails(tiny_model_dir, env, stand_ins, tmp_path):
    stand_ins.fail = True
    settings = dataclasses.replace(CONFIG, warmup_steps=0, steps=2, prompts_per_step=2, control=False,
                                   swap_check_type="", sampled_eval_size=0)
    with pytest.raises(RuntimeError, match="the engine fell over"):
        run_training(str(tiny_model_dir), tmp_path / "run", settings, env, env, [0], device="cpu", resume=False)
    (sampler,) = stand_ins.started
    assert sampler.closed and len(sampler.synced) == 1


def test_rollouts_default_to_the_policy_generate(tiny_model_dir, env, stand_ins):
    config = dataclasses.replace(CONFIG, rollout_backend=TRAINING_DEFAULTS.rollout_backend)
    policy, _ = policy_and_reference(str(tiny_model_dir), config, device="cpu")
    RLTrainer(config.resolve(), policy).rl_step(env, [0, 1])
    assert config.rollout_backend == "hf" and not stand_ins.started
