"""One-step off-policy rollouts (``rollout_mode = "one_step_off"``, ``rl.step.trainer``): the truncated importance
weight and the loss it weighs, by hand; a run at learning rate 0 equals the synchronous one; which weights
sampled which step; what is refused, and the run id of the default."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from aerorl_ops.config.fields import ConfigError
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.registry import make_env
from aerorl_ops.rl.core.functional import truncated_is_weight
from aerorl_ops.rl.run.run_id import training_run_id
from aerorl_ops.rl.step.loss import RLLoss, Targets

LN = math.log


def test_the_truncated_importance_weight_by_hand():
    old = torch.tensor([[LN(0.5), LN(0.5), LN(0.1)]])  # [1, 3] the step's start
    behaviour = torch.tensor([[LN(0.2), LN(0.5), LN(0.4)]])  # [1, 3] the weights that sampled them
    weight = truncated_is_weight(old, behaviour, cap=2.0)  # ratios 2.5 (capped), 1, 0.25
    assert weight[0].tolist() == pytest.approx([2.0, 1.0, 0.25], rel=1e-6)
    assert not weight.requires_grad
    assert truncated_is_weight(old.requires_grad_(), behaviour, cap=3.0)[0].tolist() == pytest.approx(
        [2.5, 1.0, 0.25], rel=1e-6)
    with pytest.raises(ValueError, match="cap must be positive"):
        truncated_is_weight(old, behaviour, cap=0.0)


def loss_of(is_weight: torch.Tensor | None, old: torch.Tensor) -> tuple[float, list[float]]:
    """The loss (ppo, clip 0.2, token-mean, k3 KL x 0.1 in the loss) of the hand-computed step, and its
    gradient to the new log-probs."""
    new = torch.tensor([[LN(0.55), LN(0.45)]], requires_grad=True)  # [1, 2] during the update
    ref = torch.tensor([[LN(0.55), LN(0.9)]])  # [1, 2] the reference
    ones = torch.ones(1, 2)
    loss = RLLoss("token-mean", 0.2, 0.2, 3.0, 0.1, "k3", 0.0, 0.5, 0.5)
    part, _ = loss(new, torch.zeros(1, 2), None, Targets(old, ones, ones, ones, ref, None, is_weight))
    part.weighted.backward()
    return part.value, new.grad[0].tolist()


def test_a_one_step_off_update_by_hand():
    """Behaviour [0.2, 0.5], step start [0.5, 0.5], update [0.55, 0.45], reference [0.55, 0.9] (probabilities
    of the sampled tokens), advantages 1. With rollout_is: ratios to the start 1.1, 0.9 (no clip), weights
    min(2.5, 2) = 2 and 1: policy (-2.2 - 0.9) / 2 = -1.55; k3 KL: 0 and 2 - ln 2 - 1, x 0.1 / 2.
    Gradient: -w x ratio / 2 = -1.1, -0.45, plus the KL's 0.1 / 2 x (1 - 2) = -0.05 at the second token."""
    old = torch.tensor([[LN(0.5), LN(0.5)]])
    behaviour = torch.tensor([[LN(0.2), LN(0.5)]])
    value, grad = loss_of(truncated_is_weight(old, behaviour, 2.0), old)
    assert value == pytest.approx(-1.55 + 0.05 * (1 - LN(2)), rel=1e-6)
    assert grad == pytest.approx([-1.1, -0.5], rel=1e-6)
    # rollout_is = false: the ratio is to the behaviour weights, 2.75 (clipped at 1.2: no gradient) and 0.9
    value, grad = loss_of(None, behaviour)
    assert value == pytest.approx((-1.2 - 0.9) / 2 + 0.05 * (1 - LN(2)), rel=1e-6)
    assert grad == pytest.approx([0.0, -0.5], rel=1e-6, abs=1e-9)


@pytest.fixture
def env():
    return make_env("easy_vqa", split="train", limit=16, seed=1)


def draws_of(step: int):
    """Step ``step``'s draws (0-based): round r's two prompts, as ``ItemSampler.batch(step, 2, r)`` gives them."""
    return lambda r: [(2 * step + 5 * r) % 16, (2 * step + 1 + 5 * r) % 16]


def run_steps(tiny_model_dir, env, mode: str, learning_rate: float, steps: int = 3, ahead: bool = False,
              threads: int = 1, **changes):
    """``steps`` RL steps on prompts [2k, 2k + 1]; ``ahead``: each step told the next's prompts (one_step_off
    samples them in the background). Returns the steps' stats and the weights before and after each."""
    from aerorl_ops.rl.runtime.policy import policy_and_reference
    from aerorl_ops.rl.step.trainer import RLTrainer

    torch.set_num_threads(threads)
    config = TrainingSettings(group_size=2, prompts_per_step=2, max_new_tokens=3, kl_coef=0.0, seed=3,
                              learning_rate=learning_rate, rollout_mode=mode, **changes)
    policy, _ = policy_and_reference(str(tiny_model_dir), config, device="cpu")
    trainer = RLTrainer(config.resolve(), policy)
    after = [{n: p.detach().clone() for n, p in policy.loaded.model.named_parameters()}]  # weights after step k
    stats = []
    for k in range(steps):
        following = draws_of(k + 1) if ahead and k + 1 < steps else None
        stats.append(trainer.rl_step(env, draws_of(k)(0), draws_of(k), following))
        after.append({n: p.detach().clone() for n, p in policy.loaded.model.named_parameters()})
    return stats, after


TIMES = ("step_s", "tokens_per_s", "peak_memory_mb", "rollout_s", "scoring_s", "update_s")


def rows(stats) -> list[dict]:
    """The steps' training_steps rows without their times and memory."""
    return [{k: v for k, v in dataclasses.asdict(s).items() if k not in TIMES} for s in stats]


@pytest.mark.parametrize("ahead", [False, True])
def test_at_learning_rate_0_one_step_off_equals_sync(tiny_model_dir, env, ahead):
    sync, _ = run_steps(tiny_model_dir, env, "sync", 0.0, ahead=ahead)
    off, _ = run_steps(tiny_model_dir, env, "one_step_off", 0.0, ahead=ahead)
    for field in ("loss", "reward_mean", "accuracy", "entropy", "response_length", "clip_fraction", "grad_norm"):
        assert [getattr(s, field) for s in off] == [getattr(s, field) for s in sync], field
    assert [s.behaviour_step for s in sync] == [0, 1, 2]
    assert [s.behaviour_step for s in off] == [0, 0, 1]


@pytest.mark.parametrize("ahead", [False, True])
def test_one_step_off_samples_step_k_with_the_weights_after_step_k_minus_2(tiny_model_dir, env, monkeypatch, ahead):
    """The model that samples each step's replies holds the weights after step k-2 (k >= 2; step 1: its start);
    told the next step's prompts, steps 2 to 4 are sampled in the worker thread, during the previous update."""
    import threading

    from aerorl_ops.rl.step import rollout_ahead
    from aerorl_ops.rl.step import trainer as trainer_module
    from aerorl_ops.rl.step.behaviour import BehaviourWeights

    sampled_with, scored_with, threads = [], [], []
    original, logprobs = trainer_module.step_rollout, BehaviourWeights.logprobs

    def spying(loaded, *args, **kwargs):
        sampled_with.append({n: p.detach().clone() for n, p in loaded.model.named_parameters()})
        threads.append(threading.current_thread().name)
        return original(loaded, *args, **kwargs)

    def scoring(self, *args, **kwargs):
        scored_with.append({n: p.detach().clone() for n, p in self.model.named_parameters()})
        return logprobs(self, *args, **kwargs)

    monkeypatch.setattr(trainer_module, "step_rollout", spying)
    monkeypatch.setattr(rollout_ahead, "step_rollout", spying)
    monkeypatch.setattr(BehaviourWeights, "logprobs", scoring)
    stats, after = run_steps(tiny_model_dir, env, "one_step_off", 1e-2, steps=4, ahead=ahead)
    assert [s.behaviour_step for s in stats] == [0, 0, 1, 2]
    assert threads == ["MainThread"] + 3 * ["rollout-ahead" if ahead else "MainThread"]
    moved = [any(not torch.equal(after[k][n], after[k + 1][n]) for n in after[k]) for k in range(4)]
    assert all(moved)  # every update changed the weights, so each step's sampler is told apart
    for k, weights in enumerate(sampled_with, start=1):
        expected = after[max(k - 2, 0)]
        assert weights.keys() == expected.keys()
        assert all(torch.equal(weights[n], expected[n]) for n in expected), f"step {k}"
    assert len(scored_with) == 3  # steps 2 to 4: their behaviour log-probs come from the weights that sampled them
    for k, weights in enumerate(scored_with, start=2):
        assert all(torch.equal(weights[n], after[k - 2][n]) for n in after[k - 2]), f"step {k}"


def slowed_update(monkeypatch, seconds: float) -> None:
    """Every update of ``RLTrainer`` starts ``seconds`` late, so the worker finishes long before it."""
    import time

    from aerorl_ops.rl.step.trainer import RLTrainer

    update = RLTrainer._update

    def slow(self, *args, **kwargs):
        time.sleep(seconds)
        return update(self, *args, **kwargs)

    monkeypatch.setattr(RLTrainer, "_update", slow)


@pytest.mark.parametrize("changes", [{}, {"dynamic_sampling": True, "max_sampling_rounds": 2}])
def test_background_rollouts_equal_foreground_ones_whatever_the_timing(tiny_model_dir, env, monkeypatch, changes):
    """The rows and weights of one_step_off sampled in the background equal those sampled after each update in
    this thread (one_step_off before it had a worker), bit for bit, and do not move when the update is slow."""
    foreground, weights = run_steps(tiny_model_dir, env, "one_step_off", 1e-2, ahead=False, **changes)
    background, background_weights = run_steps(tiny_model_dir, env, "one_step_off", 1e-2, ahead=True, **changes)
    slowed_update(monkeypatch, 0.2)
    slow, slow_weights = run_steps(tiny_model_dir, env, "one_step_off", 1e-2, ahead=True, **changes)
    assert rows(background) == rows(foreground)
    assert rows(slow) == rows(foreground)
    assert [s.behaviour_step for s in slow] == [0, 0, 1]
    if changes:
        assert [s.sampling_rounds for s in slow] == [2, 2, 2]  # later rounds drawn in the worker too
    for k in range(4):
        assert all(torch.equal(background_weights[k][n], weights[k][n]) for n in weights[k]), f"after step {k}"
        assert all(torch.equal(slow_weights[k][n], weights[k][n]) for n in weights[k]), f"after step {k}"


def test_a_failure_of_the_worker_is_raised_by_the_next_step_in_one_line(tiny_model_dir, env, monkeypatch):
    from aerorl_ops.rl.step import rollout_ahead

    def failing(*args, **kwargs):
        raise ValueError("no image for item 3\n(a second line)")

    monkeypatch.setattr(rollout_ahead, "step_rollout", failing)
    with pytest.raises(rollout_ahead.BackgroundRolloutError) as raised:
        run_steps(tiny_model_dir, env, "one_step_off", 1e-2, steps=3, ahead=True)
    assert str(raised.value) == ("step 2: its rollout, sampled in the background during step 1's update, failed: "
                                 "ValueError: no image for item 3 (a second line)")
    assert isinstance(raised.value.__cause__, ValueError)


def test_a_stop_request_ends_the_worker_and_the_next_step_samples_in_the_foreground(tiny_model_dir, env,
                                                                                   monkeypatch):
    """A stop asked for during step 1 (Ctrl-C: ``aerorl_ops.stop``) ends the worker at its next token; a step 2
    that runs anyway samples in this thread, the same rows."""
    import threading

    from aerorl_ops.rl.step import trainer as trainer_module
    from aerorl_ops.rl.step.trainer import RLTrainer
    from aerorl_ops.stop import clear_stop, request_stop

    expected, _ = run_steps(tiny_model_dir, env, "one_step_off", 1e-2, steps=2, ahead=True)
    logged, sampled = trainer_module.rollout_samples, []
    original = trainer_module.step_rollout

    def asking_to_stop(*args, **kwargs):  # in step 1, before its update: the worker sees it from its first token
        request_stop(2)  # what the command's SIGINT handler does
        return logged(*args, **kwargs)

    def spying(*args, **kwargs):
        sampled.append(threading.current_thread().name)
        return original(*args, **kwargs)

    def cleared(self, *args, **kwargs):  # the stop is taken at the end of the step: clear it before the next
        clear_stop()
        return rl_step(self, *args, **kwargs)

    rl_step = RLTrainer.rl_step
    monkeypatch.setattr(trainer_module, "rollout_samples", asking_to_stop)
    monkeypatch.setattr(RLTrainer, "rl_step", cleared)
    monkeypatch.setattr(trainer_module, "step_rollout", spying)
    try:
        stopped, _ = run_steps(tiny_model_dir, env, "one_step_off", 1e-2, steps=2, ahead=True)
    finally:
        clear_stop()
    assert sampled == ["MainThread", "MainThread"]  # step 2 too: its background rollout was stopped
    assert rows(stopped) == rows(expected)
    assert not [t for t in threading.enumerate() if t.name == "rollout-ahead"]


def test_an_interrupted_update_stops_and_waits_for_the_worker(tiny_model_dir, env, monkeypatch):
    import threading

    from aerorl_ops.rl.step.trainer import RLTrainer

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(RLTrainer, "_update", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_steps(tiny_model_dir, env, "one_step_off", 1e-2, steps=2, ahead=True)
    assert not [t for t in threading.enumerate() if t.name == "rollout-ahead"]


def test_the_update_and_the_worker_share_the_cpu_threads(tiny_model_dir, env, monkeypatch):
    """On a CPU torch runs half its threads while the worker samples beside the update (step 1), all of them
    when nothing does (step 2, the last) and after."""
    from aerorl_ops.rl.step.trainer import RLTrainer

    update, seen = RLTrainer._update, []

    def counting(self, *args, **kwargs):
        seen.append(torch.get_num_threads())
        return update(self, *args, **kwargs)

    monkeypatch.setattr(RLTrainer, "_update", counting)
    try:
        run_steps(tiny_model_dir, env, "one_step_off", 0.0, steps=2, ahead=True, threads=2)
        assert seen == [1, 2]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(1)


def test_a_training_run_samples_each_next_rl_step_in_the_background(tiny_model_dir, tmp_path, monkeypatch):
    """A whole run (a warm-up step, 3 RL steps, evaluations and checkpoints between them): the second and third
    RL steps are sampled by the worker, and every row equals that of the run sampling them in this thread."""
    import threading

    from aerorl_ops.rl.run.phases import run_training
    from aerorl_ops.rl.step import rollout_ahead
    from aerorl_ops.rl.step.trainer import RLTrainer

    torch.set_num_threads(1)
    train_env = make_env("easy_vqa", split="train", limit=32, seed=1)
    eval_env = make_env("easy_vqa", split="test", limit=4, seed=0)
    settings = TrainingSettings(group_size=2, max_new_tokens=3, kl_coef=0.0, seed=4, warmup_steps=1,
                                warmup_batch_size=4, steps=3, prompts_per_step=2, control=False, swap_check_type="",
                                eval_interval=1, checkpoint_interval=2, rollout_mode="one_step_off")
    original, threads = rollout_ahead.step_rollout, []

    def spying(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return original(*args, **kwargs)

    monkeypatch.setattr(rollout_ahead, "step_rollout", spying)
    background = run_training(str(tiny_model_dir), tmp_path / "background", settings, train_env, eval_env, range(4),
                              device="cpu", resume=False)
    assert threads == ["rollout-ahead", "rollout-ahead"]
    rl_step = RLTrainer.rl_step
    monkeypatch.setattr(RLTrainer, "rl_step", lambda self, env, prompts, more, following: rl_step(
        self, env, prompts, more))  # told nothing of the next step: samples each in this thread
    foreground = run_training(str(tiny_model_dir), tmp_path / "foreground", settings, train_env, eval_env, range(4),
                              device="cpu", resume=False)
    assert [s.behaviour_step for s in background.steps] == [None, 1, 1, 2]
    assert rows(background.steps) == rows(foreground.steps)
    assert [e.accuracy for e in background.evals] == [e.accuracy for e in foreground.evals]


@pytest.mark.parametrize(("changes", "problem"), [
    ({"rollout_backend": "vllm"}, 'rollout_mode = "one_step_off" samples with a frozen copy of the policy, not a '
     "vLLM engine, yet"),
    ({"nproc_per_node": 2}, 'rollout_mode = "one_step_off" needs nproc_per_node = 1, got 2'),
    ({"algorithm": "gspo"}, "rollout_is weighs the per-token ppo policy loss only, got policy_loss 'gspo'"),
    ({"policy_loss": "cispo"}, "rollout_is weighs the per-token ppo policy loss only, got policy_loss 'cispo'"),
])
def test_what_one_step_off_cannot_do_yet_is_refused_in_one_line(changes, problem):
    settings = dataclasses.replace(TrainingSettings(rollout_mode="one_step_off"), **changes)
    with pytest.raises(ConfigError) as raised:
        settings.check_rules("aerorl train")
    assert str(raised.value).startswith(f"aerorl train: {problem}")
    assert "\n" not in str(raised.value)
    TrainingSettings(rollout_mode="one_step_off", algorithm="gspo", rollout_is=False).check_rules("file")


def test_a_multi_turn_environment_is_refused_at_the_first_step(tiny_model_dir):
    from aerorl_ops.rl.runtime.policy import policy_and_reference
    from aerorl_ops.rl.step.trainer import RLTrainer

    config = TrainingSettings(group_size=2, prompts_per_step=1, max_new_tokens=2, kl_coef=0.0,
                              rollout_mode="one_step_off")
    policy, _ = policy_and_reference(str(tiny_model_dir), config, device="cpu")
    two_tries = make_env("easy_vqa_two_tries", split="train", limit=4, seed=1)
    with pytest.raises(ConfigError, match='one_step_off" cannot train on the multi-turn environment'):
        RLTrainer(config.resolve(), policy).rl_step(two_tries, [0])


def test_the_default_leaves_run_ids_as_they_were():
    def run_id(settings: TrainingSettings) -> str:
        return training_run_id(settings, settings.resolve())

    default = TrainingSettings()
    assert run_id(dataclasses.replace(default, rollout_mode="sync", rollout_is=True, rollout_is_cap=2.0)) == run_id(
        default)
    assert run_id(dataclasses.replace(default, rollout_mode="one_step_off")) != run_id(default)
