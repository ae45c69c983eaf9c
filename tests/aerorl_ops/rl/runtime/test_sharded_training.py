"""``sharding = "fsdp2"`` (``rl.runtime.sharding``, ``rl.runtime.sharded_checkpoint``): two gloo ranks on CPU train the
embedded tiny model as one process does with the same global batch, each holding about half of the
parameters, gradients and AdamW state, and their checkpoints resume on another number of ranks.

One module fixture runs everything once (a spawn of two ranks costs ~20 s of imports on a shared
2-core machine; the runs themselves take seconds): in one process, a trainer's warm-up and 3 GRPO
steps and a whole run (warm-up, 3 PPO steps on LoRA); on two sharded ranks the same, then their run
and the one process's resumed from their step-2 checkpoints; then, in one process again, the two
ranks' run resumed from theirs. About 45 s in all.
"""

from __future__ import annotations

import dataclasses
import shutil
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import duckdb
import pytest
import torch
import torch.multiprocessing as mp
from safetensors.torch import load_file
from torch.distributed.tensor import DTensor

from aerorl_ops.config.fields import ConfigError
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.base import SingleTurnEnv
from aerorl_ops.envs.registry import make_env
from aerorl_ops.models.checkpoint_refs import OPTIMIZER_SHARDS, content_hash
from aerorl_ops.rl.record.rows import TrainingRunRecord
from aerorl_ops.rl.run.phases import run_training
from aerorl_ops.rl.runtime.checkpoint_files import checked_checkpoint_state
from aerorl_ops.rl.runtime.distributed import SINGLE, DataParallel
from aerorl_ops.rl.runtime.policy import policy_and_reference
from aerorl_ops.rl.step.multi_turn import check_sharded_environment
from aerorl_ops.rl.step.schedule import ItemSampler
from aerorl_ops.rl.step.trainer import RLTrainer
from aerorl_ops.rows.load_result import LoadResult
from aerorl_ops.storage.duckdb_store import ensure_tables, replace_partition
from aerorl_ops.storage.training_schema import TRAINING_RUNS
from aerorl_ops.telemetry import TelemetrySample, summarize
from tests.aerorl_ops.rl.runtime.test_distributed import free_port, join, parity_grader

RL_STEPS = 3
STEP_SETTINGS = dict(  # full fine-tuning against an int8 reference, activations recomputed, two updates a step
    algorithm="grpo", group_size=4, kl_coef=0.05, quant_bits=8, loss_agg_mode="seq-mean-token-sum-norm",
    grad_accumulation=2, ppo_mini_batches=2, gradient_checkpointing=True, max_new_tokens=3, seed=2)
RUN_SETTINGS = dict(  # PPO's value head, LoRA (frozen base) with its base as the reference, a frozen vision tower
    algorithm="ppo", group_size=2, kl_coef=0.05, lora_rank=4, reference="lora_base", freeze_vision_tower=True,
    ppo_epochs=2, grad_accumulation=2, learning_rate=3e-3, max_new_tokens=3, seed=2, warmup_steps=1,
    warmup_batch_size=4, steps=RL_STEPS, prompts_per_step=2, checkpoint_interval=2, eval_interval=100,
    control=False, swap_check_type="", sampled_eval_size=0)
WHOLE_RUN = dict(control=True, swap_check_type="colour", sampled_eval_size=2)  # and every collective of a run's end
"""Checkpoints ``warmup`` and ``step-2`` (where the resumed runs start), then ``step-4`` at the end."""


def whole_parameters(trainer: RLTrainer) -> dict[str, torch.Tensor]:
    """The policy's and value head's parameters, gathered whole (a collective with sharded ones)."""
    model = trainer.policy.loaded.model
    trainer.sharding.parameters(model)  # the sharded ones registered
    named = dict(model.named_parameters())
    if trainer.value_head is not None:
        named.update({f"value_head.{n}": p for n, p in trainer.value_head.named_parameters()})
    return {name: (p.full_tensor() if isinstance(p, DTensor) else p).detach().clone() for name, p in named.items()}


def trainer_steps(dp: DataParallel, model_dir: str, sharding: str) -> dict:
    """A warm-up step and ``RL_STEPS`` GRPO steps of a trainer (parity rewards: they vary untrained)."""
    torch.manual_seed(0)
    settings = TrainingSettings(**STEP_SETTINGS, sharding=sharding, nproc_per_node=dp.world_size)
    policy, reference = policy_and_reference(model_dir, settings, device="cpu")
    trainer = RLTrainer(settings.resolve(), policy, reference, dp=dp)
    env = SingleTurnEnv("parity", LoadResult(items=list(make_env("easy_vqa", split="train", limit=8, seed=1).items)),
                        parity_grader)
    sampler = ItemSampler(env, 0)
    start = whole_parameters(trainer)
    steps = [trainer.supervised_step(env, sampler.batch(0, 4))]
    steps += [trainer.rl_step(env, sampler.batch(step, 2), partial(sampler.batch, step, 2))
              for step in range(1, RL_STEPS + 1)]
    return {"start": start, "end": whole_parameters(trainer), "steps": steps, "bytes": trainer.state_bytes}


def whole_run(dp: DataParallel, model_dir: str, run_dir: Path, sharding: str, **changes) -> dict:
    """``RUN_SETTINGS`` as a ``TrainingRun`` under ``run_dir`` (resuming from its newest checkpoint)."""
    settings = TrainingSettings(**{**RUN_SETTINGS, **changes}, sharding=sharding, nproc_per_node=dp.world_size)
    env = make_env("easy_vqa", split="train", limit=16, seed=1)
    result = run_training(model_dir, run_dir, settings, env, env, [0, 1], device="cpu", dp=dp)
    return {"result": result, "steps": result.steps}


def two_ranks(rank: int, port: int, model_dir: str, root: Path) -> None:
    torch.set_num_threads(1)
    dp = join(rank, 2, port, timeout_s=120)
    try:
        trained = trainer_steps(dp, model_dir, "fsdp2")
        run = whole_run(dp, model_dir, root / "two", "fsdp2", **WHOLE_RUN)
        if dp.is_main:
            resumable_copy(root / "two", root / "two_to_two")
        dp.barrier()
        resumed = {name: whole_run(dp, model_dir, root / name, "fsdp2") for name in ("two_to_two", "one_to_two")}
        if dp.is_main:
            torch.save({"trainer": trained, "run": run, **resumed}, root / "two.pt")
    finally:
        dp.close()


def resumable_copy(run_dir: Path, to: Path) -> Path:
    """A run folder holding ``run_dir``'s warm-up and step-2 checkpoints: as if killed after step 2."""
    for name in ("warmup", "step-2"):
        shutil.copytree(run_dir / name, to / name)
    return to


@pytest.fixture(scope="module")
def runs(tiny_model_dir, tmp_path_factory) -> dict:
    torch.set_num_threads(1)
    root, model = tmp_path_factory.mktemp("sharded"), str(tiny_model_dir)
    one = {"trainer": trainer_steps(SINGLE, model, "none"), "run": whole_run(SINGLE, model, root / "one", "none",
                                                                              **WHOLE_RUN)}
    resumable_copy(root / "one", root / "one_to_two")
    mp.spawn(two_ranks, args=(free_port(), model, root), nprocs=2)
    two = torch.load(root / "two.pt", weights_only=False)
    two_to_one = whole_run(SINGLE, model, resumable_copy(root / "two", root / "two_to_one"), "none")
    return {"root": root, "one": one, "two": two, "two_to_one": two_to_one}


def assert_same_steps(steps, expected) -> None:
    for a, b in zip(expected, steps, strict=True):
        assert (a.step, a.phase, a.reward_mean, a.accuracy) == (b.step, b.phase, b.reward_mean, b.accuracy)
        assert b.loss == pytest.approx(a.loss, abs=1e-5)
        assert (a.kl is None and b.kl is None) or b.kl == pytest.approx(a.kl, abs=1e-5)
        assert b.grad_norm == pytest.approx(a.grad_norm, rel=1e-4)


def largest_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[name] - b[name]).abs().max()) for name in a)


@pytest.mark.slow
def test_two_sharded_ranks_train_what_one_process_trains(runs):
    one, two = runs["one"]["trainer"], runs["two"]["trainer"]
    assert largest_difference(one["start"], one["end"]) > 1e-3  # the steps trained
    assert largest_difference(one["end"], two["end"]) < 1e-5
    assert_same_steps(two["steps"], one["steps"])
    assert any(s.kl for s in one["steps"][1:]) and any(s.reward_std for s in one["steps"][1:])
    # a whole run: PPO on LoRA, its checkpoints gathered into model folders that match one process's
    assert_same_steps(runs["two"]["run"]["steps"], runs["one"]["run"]["steps"])
    final = [load_file(str(runs["root"] / run / "step-4" / "model.safetensors")) for run in ("one", "two")]
    assert largest_difference(*final) < 1e-5
    phases = [[e.phase for e in runs[run]["run"]["result"].evals] for run in ("one", "two")]
    assert phases[0] == phases[1] and "control" in phases[0]


@pytest.mark.slow
def test_each_sharded_rank_holds_about_half_the_state_and_the_run_stores_it(runs, tmp_path):
    for kind in ("trainer", "run"):
        one = runs["one"][kind]["bytes"] if kind == "trainer" else runs["one"]["run"]["result"].state_bytes_per_rank
        two = runs["two"][kind]["bytes"] if kind == "trainer" else runs["two"]["run"]["result"].state_bytes_per_rank
        assert 0 < two <= 0.6 * one, (kind, two, one)
    result = runs["two"]["run"]["result"]
    settings = TrainingSettings(**RUN_SETTINGS, sharding="fsdp2", nproc_per_node=2)
    now = datetime(2026, 11, 26, tzinfo=UTC)
    telemetry = summarize([TelemetrySample(0.1, rss_mb=700.0, cpu_pct=90.0, gpus=())], duration_s=0.1, interval_s=0.1)
    record = TrainingRunRecord.of("sharded", "tiny", settings.resolve(), result, now, now, telemetry)
    with duckdb.connect(str(tmp_path / "runs.duckdb")) as conn:
        ensure_tables(conn, [TRAINING_RUNS])
        replace_partition(conn, TRAINING_RUNS, {"run_id": "sharded"}, TRAINING_RUNS.rows([record]))
        stored = conn.execute("SELECT state_bytes_per_rank FROM training_runs").fetchone()
    assert stored == (result.state_bytes_per_rank,)


@pytest.mark.slow
def test_a_sharded_checkpoint_is_a_model_folder_with_optimizer_shards(runs):
    folder = runs["root"] / "two" / "step-4"
    names = {path.name for path in folder.iterdir()}
    assert {"config.json", "model.safetensors", "adapter", "value_head.pt", "trainer_state.pt",
            OPTIMIZER_SHARDS} <= names
    state = checked_checkpoint_state(folder)
    assert (state.step, state.optimizer, state.optimizer_shards) == (4, {}, folder / OPTIMIZER_SHARDS)
    assert {p.name for p in (folder / OPTIMIZER_SHARDS).iterdir()} == {".metadata", "__0_0.distcp", "__1_0.distcp"}
    unsharded = runs["root"] / "one" / "step-4"
    assert checked_checkpoint_state(unsharded).optimizer_shards is None
    before = content_hash(folder)  # the policy's files only: the optimizer's shards are trainer state
    shutil.rmtree(folder / OPTIMIZER_SHARDS)
    assert content_hash(folder) == before


@pytest.mark.slow
@pytest.mark.parametrize(("resumed", "uninterrupted"), [
    ("two_to_one", "two"),  # 2 sharded ranks -> 1 process: the optimizer's shards read whole
    ("one_to_two", "one"),  # 1 process -> 2 sharded ranks: an unsharded optimizer state sharded
    ("two_to_two", "two"),  # 2 -> 2: the shards read back as they were written
])
def test_a_run_resumes_on_any_number_of_ranks_with_the_uninterrupted_steps(runs, resumed, uninterrupted):
    run = runs["two"][resumed] if resumed in runs["two"] else runs[resumed]
    assert run["result"].resumed_from_step == 2
    assert_same_steps(run["steps"], runs[uninterrupted]["run"]["steps"][2:])
    final = [load_file(str(runs["root"] / name / "step-4" / "model.safetensors")) for name in (resumed, uninterrupted)]
    # a resumed LoRA policy is its merged checkpoint less the adapter (rl.runtime.lora): its base differs by rounding,
    # as it does resumed without sharding
    assert largest_difference(*final) < 1e-4


def test_a_multi_turn_environment_is_refused_for_sharded_ranks_before_anything_loads():
    two_tries = dataclasses.make_dataclass("TwoTries", [("name", str), ("max_turns", int)])("two_tries", 2)
    sharded = TrainingSettings(sharding="fsdp2", nproc_per_node=2)
    with pytest.raises(ConfigError, match=r"^sharding = \"fsdp2\" cannot train on the multi-turn environment "
                                          r"'two_tries' yet"):
        check_sharded_environment(sharded, two_tries, 2)
    check_sharded_environment(sharded, two_tries, 1)  # one process holds everything: nothing to refuse
    check_sharded_environment(TrainingSettings(nproc_per_node=2), two_tries, 2)
