"""Data parallelism (``rl.runtime.distributed``): the sharding rules, and two gloo ranks on CPU training the
embedded tiny model exactly as one process does with the same global batch."""

from __future__ import annotations

import json
import os
import socket
import time
from functools import partial
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.base import SingleTurnEnv
from aerorl_ops.envs.registry import make_env
from aerorl_ops.envs.types import StepInfo
from aerorl_ops.rl.runtime.distributed import SINGLE, DataParallel, check_data_parallel, from_environment, shard_batch
from aerorl_ops.rl.runtime.policy import policy_and_reference
from aerorl_ops.rl.step.schedule import ItemSampler
from aerorl_ops.rl.step.trainer import RLTrainer
from aerorl_ops.rows.load_result import LoadResult

RL_STEPS = 3
PROMPTS, WARMUP_BATCH = 2, 4
SETTINGS = {
    # GRPO, the KL to an unquantized reference as a loss term, the width-dependent aggregation, two updates a step
    "grpo": dict(algorithm="grpo", group_size=4, kl_coef=0.05, quant_bits=16,
                 loss_agg_mode="seq-mean-token-sum-norm", grad_accumulation=2, ppo_mini_batches=2),
    # PPO's value head and GAE over the global batch, LoRA with its base as the reference, a frozen vision tower
    "ppo_lora": dict(algorithm="ppo", group_size=2, kl_coef=0.05, lora_rank=4, reference="lora_base",
                     freeze_vision_tower=True, ppo_epochs=2, grad_accumulation=4, learning_rate=3e-3),
    # DAPO's dynamic sampling (groups of 2 rewarded by parity: often all equal, so rounds and rebuilt batches),
    # overlong shaping and filtering, GMPO's per-row loss share beside the token-mean KL's
    "dapo_gmpo": dict(algorithm="dapo", policy_loss="gmpo", group_size=2, kl_coef=0.05, quant_bits=16,
                      mask_truncated=True, max_sampling_rounds=3, grad_accumulation=2,
                      micro_batch_tokens=200),  # and token-budget micro-batches (each rank cuts its own rows)
}


def test_each_rank_owns_an_equal_run_of_every_minibatch():
    shards = shard_batch(rows=10, micro_batch_count=8, minibatch_count=2, world_size=2)
    assert shards.minibatches == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert shards.owned(0) == [[0, 1], [4, 5]] and shards.owned(1) == [[2, 3], [6, 7]]
    assert shards.parts[:3] == ((0, 1), (2, 3), (4,))  # 10 rows in 8 parts: the first two hold two
    assert shards.rows_of(0) == [0, 1, 2, 3, 6, 7] and shards.rows_of(1) == [4, 5, 8, 9]
    assert shards.minibatch_rows(1) == [6, 7, 8, 9]
    local = torch.arange(10)[shards.rows_of(0)]
    assert torch.equal(shards.gather(SINGLE, local), local)  # one process: nothing moves


@pytest.mark.parametrize(("settings", "named"), [
    (dict(grad_accumulation=3, ppo_mini_batches=1, rollout_rows=12, supervised_rows=0), r"grad_accumulation \(3\)"),
    (dict(grad_accumulation=4, ppo_mini_batches=2, rollout_rows=6, supervised_rows=0), "prompts_per_step"),
    (dict(grad_accumulation=2, ppo_mini_batches=1, rollout_rows=8, supervised_rows=1), "warmup_batch_size"),
])
def test_a_batch_that_cannot_be_split_over_the_ranks_names_the_settings(settings, named):
    with pytest.raises(ValueError, match=named):
        check_data_parallel(2, **settings)
    check_data_parallel(1, **settings)  # one process takes any batch


def join(rank: int, world_size: int, port: int, timeout_s: float):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    return from_environment(timeout_s, torch.device("cpu"))


def wait_for_a_silent_peer(rank: int, port: int, out: str) -> None:
    """Rank 1 joins, then never reaches the collective rank 0 waits at (for longer than the timeout)."""
    dp = join(rank, 2, port, timeout_s=2)
    if rank == 1:
        time.sleep(5)
        return
    started = time.monotonic()
    try:
        dp.sum([1.0])
    except RuntimeError as error:
        Path(out).write_text(json.dumps({"error": str(error), "waited": time.monotonic() - started}))


def test_a_collective_gives_up_after_the_timeout(tmp_path: Path):
    out = tmp_path / "rank0.json"
    mp.spawn(wait_for_a_silent_peer, args=(free_port(), str(out)), nprocs=2)
    waited = json.loads(out.read_text())
    assert "timed out" in waited["error"].lower() and 1.5 < waited["waited"] < 4.5


def parity_grader(item, completion):
    """Reward 1 when the reply's first token id is even: rewards vary even for an untrained model."""
    even = bool(completion.token_ids) and completion.token_ids[0] % 2 == 0
    return float(even), StepInfo({}, even, completion.text)


def train(rank: int, world_size: int, port: int, model_dir: str, settings: dict, out: str) -> None:
    """One warm-up step, then ``RL_STEPS`` RL steps, on rank ``rank`` of ``world_size`` (1 = no process
    group); rank 0 saves the parameters it started from and ended with (policy and value head)."""
    torch.set_num_threads(1)
    dp = join(rank, world_size, port, timeout_s=60) if world_size > 1 else SINGLE
    torch.manual_seed(0)  # LoRA's initial adapters
    config = TrainingSettings(max_new_tokens=3, seed=2, **settings)
    policy, reference = policy_and_reference(model_dir, config, device="cpu")
    trainer = RLTrainer(config.resolve(), policy, reference, dp=dp)
    env = SingleTurnEnv("parity", LoadResult(items=list(make_env("easy_vqa", split="train", limit=8, seed=1).items)),
                        parity_grader)
    sampler = ItemSampler(env, 0)

    def parameters() -> dict[str, torch.Tensor]:
        named = dict(policy.loaded.model.named_parameters())
        if trainer.value_head is not None:
            named.update({f"value_head.{n}": p for n, p in trainer.value_head.named_parameters()})
        return {name: p.detach().clone() for name, p in named.items()}

    start = parameters()
    steps = [trainer.supervised_step(env, sampler.batch(0, WARMUP_BATCH))]
    steps += [trainer.rl_step(env, sampler.batch(step, PROMPTS), partial(sampler.batch, step, PROMPTS))
              for step in range(1, RL_STEPS + 1)]
    if dp.is_main:
        torch.save({"start": start, "end": parameters(), "steps": steps}, out)
    dp.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize("name", SETTINGS)
def test_two_gloo_ranks_train_the_parameters_one_process_trains(name, tiny_model_dir, tmp_path: Path):
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    train(0, 1, 0, str(tiny_model_dir), SETTINGS[name], str(one))
    mp.spawn(train, args=(2, free_port(), str(tiny_model_dir), SETTINGS[name], str(two)), nprocs=2)
    single, double = torch.load(one, weights_only=False), torch.load(two, weights_only=False)
    moved = max(float((single["end"][n] - single["start"][n]).abs().max()) for n in single["start"])
    assert moved > 1e-3  # the steps trained: a difference below 1e-5 is not the absence of any change
    assert single["start"].keys() == double["end"].keys()
    differences = {n: float((single["end"][n] - double["end"][n]).abs().max()) for n in single["end"]}
    assert max(differences.values()) < 1e-5, sorted(differences.items(), key=lambda item: -item[1])[:3]
    for a, b in zip(single["steps"], double["steps"], strict=True):  # rank 0 reports the global step
        assert (a.step, a.phase, a.reward_mean, a.accuracy, a.response_clip_ratio) == (
            b.step, b.phase, b.reward_mean, b.accuracy, b.response_clip_ratio)
        assert b.loss == pytest.approx(a.loss, rel=1e-4, abs=1e-5)
        assert b.grad_norm == pytest.approx(a.grad_norm, rel=1e-4)
        assert b.response_length == pytest.approx(a.response_length)
        assert (a.groups_sampled, a.groups_kept, a.groups_dropped, a.groups_filled, a.sampling_rounds) == (
            b.groups_sampled, b.groups_kept, b.groups_dropped, b.groups_filled, b.sampling_rounds)
    if SETTINGS[name].get("algorithm") == "dapo":  # batches of several rounds were rebuilt on both ranks
        assert max(s.sampling_rounds for s in single["steps"][1:]) > 1
    assert any(s.reward_std for s in single["steps"][1:])  # rewards varied: the advantages were not all 0


def share_a_rollout(rank: int, port: int, out: str) -> None:
    """Each rank holds its rows' values (global row id x 10) and gathers the whole rollout."""
    dp = join(rank, 2, port, timeout_s=30)
    try:
        share = dp.share_rollout(rows=10, micro_batch_count=8, minibatch_count=2)
        local = share.rows(torch.device("cpu")) * 10  # [b]
        flags = share.rows(torch.device("cpu")) % 3 == 0  # [b] bool, which gloo cannot gather as such
        values, none, gathered_flags = share.gather_rollout(local, None, flags, device=torch.device("cpu"))
        minibatches = share.minibatches([f"batch-{part}" for part in share.parts], torch.arange(10)[:, None])
        Path(out, f"rank{rank}.json").write_text(json.dumps({
            "parts": share.parts, "items": share.items(list(range(100, 110))), "values": values.tolist(),
            "none": none, "flags": gathered_flags.tolist(),
            "minibatches": [[[batch, span.start, span.stop] for batch, span in parts] for parts, _ in minibatches],
            "masks": [whole[:, 0].tolist() for _, whole in minibatches]}))
    finally:
        dp.close()


def test_two_gloo_ranks_gather_a_rollout_in_global_row_order(tmp_path: Path):
    mp.spawn(share_a_rollout, args=(free_port(), str(tmp_path)), nprocs=2)
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2)]
    assert [r["parts"] for r in ranks] == [[0, 1, 4, 5], [2, 3, 6, 7]]
    assert ranks[0]["items"] == [[100, 101], [102, 103], [106], [107]]  # rows 0-3, 6, 7 of 10
    for r in ranks:  # every rank ends with the global tensors, in global row order
        assert r["values"] == [0, 10, 20, 30, 40, 50, 60, 70, 80, 90] and r["none"] is None
        assert r["flags"] == [True, False, False, True, False, False, True, False, False, True]
        assert r["masks"] == [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9]]  # each minibatch's rows on both ranks
    assert ranks[0]["minibatches"] == [[["batch-0", 0, 2], ["batch-1", 2, 4]], [["batch-4", 4, 5], ["batch-5", 5, 6]]]
    assert ranks[1]["minibatches"] == [[["batch-2", 0, 1], ["batch-3", 1, 2]], [["batch-6", 2, 3], ["batch-7", 3, 4]]]


def test_rl_step_reads_as_the_algorithm_without_the_ranks_bookkeeping():
    import inspect

    source = inspect.getsource(RLTrainer.rl_step)
    assert "share.gather_rollout(" in source
    assert [word for word in ("shard", "row_spans", "rows_of", "local_parts", "minibatch_rows", "owned(")
            if word in source] == []


def test_a_supervised_step_takes_its_ranks_micro_batches_from_one_call():
    """10 rows in 4 micro-batches over 2 ranks: rank 0 owns micro-batches 0 and 1, rank 1 owns 2 and 3
    (the rows of each as ``micro_batches`` cuts them); one process owns all four."""
    import inspect

    assert DataParallel(rank=0, world_size=2).local_micro_batches(10, 4) == [(0, 1, 2), (3, 4, 5)]
    assert DataParallel(rank=1, world_size=2).local_micro_batches(10, 4) == [(6, 7), (8, 9)]
    assert DataParallel().local_micro_batches(10, 4) == [(0, 1, 2), (3, 4, 5), (6, 7), (8, 9)]
    with pytest.raises(ValueError, match="a supervised batch of 10 rows makes minibatches of 3 micro-batches"):
        DataParallel(rank=0, world_size=2).local_micro_batches(10, 3, "a supervised batch")
    source = inspect.getsource(RLTrainer.accumulate_supervised)
    assert "local_micro_batches(" in source and "shard_batch" not in source and "local_parts" not in source
