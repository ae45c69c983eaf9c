"""Seconds per RL step on 2 gloo ranks, replicated and sharded (FSDP2), against 1 process, with the same
global batch.

Both runs are the trainer of ``rl_run`` (``rl.step.trainer.RLTrainer``) on the embedded tiny Qwen2-VL on
CPU, started the same way (one spawned process per rank, ``--threads`` torch threads each, a gloo
process group only for 2 ranks): a supervised step, one untimed RL step, then ``--steps`` timed RL
steps of ``--prompts`` prompts x ``--group-size`` replies in ``--accumulation`` micro-batches. The
2-rank run generates, scores and backpropagates half the micro-batches on each rank, and adds the
gathers of the rollout's scores and the gradient all-reduce; with ``sharding = "fsdp2"`` it gathers
each block's parameters for every forward (each generated token included) and backward, and
reduce-scatters the gradients instead. On a machine with fewer free cores than ranks, the ratio
measures that overhead, not a speed-up.

    python benchmarks/bench_torchrun_step.py
    python benchmarks/bench_torchrun_step.py --prompts 8 --group-size 4 --accumulation 4 --steps 20
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.multiprocessing as mp
from quiet_logs import quiet_model_logs

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.registry import make_env
from aerorl_ops.models.embedded_default import build_tiny_qwen2vl
from aerorl_ops.rl.runtime.distributed import SINGLE, from_environment
from aerorl_ops.rl.runtime.policy import policy_and_reference
from aerorl_ops.rl.step.schedule import ItemSampler
from aerorl_ops.rl.step.trainer import RLTrainer


def rank_main(rank: int, world_size: int, port: int, model_dir: str, args: argparse.Namespace, out: str,
              sharding: str) -> None:
    """Train on rank ``rank`` of ``world_size``; rank 0 writes each timed step's seconds to ``out``."""
    quiet_model_logs(args.threads)
    if world_size > 1:
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                          MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dp = from_environment(600, torch.device("cpu")) if world_size > 1 else SINGLE
    config = TrainingSettings(group_size=args.group_size, max_new_tokens=args.max_new_tokens, kl_coef=0.0,
                              grad_accumulation=args.accumulation, seed=0, sharding=sharding,
                              nproc_per_node=world_size)
    policy, _ = policy_and_reference(model_dir, config, device="cpu")
    trainer = RLTrainer(config.resolve(), policy, dp=dp)
    env = make_env("easy_vqa", split="train", limit=256, seed=1)
    sampler = ItemSampler(env, 0)
    trainer.supervised_step(env, sampler.batch(0, args.prompts * args.group_size))
    seconds = []
    for step in range(1, args.steps + 2):
        dp.barrier()
        started = time.perf_counter()
        trainer.rl_step(env, sampler.batch(step, args.prompts))
        dp.barrier()
        seconds.append(time.perf_counter() - started)
    if dp.is_main:
        Path(out).write_text(json.dumps(seconds[1:]))  # the first RL step warms up
    dp.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=4, help="prompts per RL step")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--accumulation", type=int, default=2, help="micro-batches per update (a multiple of 2)")
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10, help="timed RL steps")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="aerorl-bench-torchrun-"))
    model_dir = str(build_tiny_qwen2vl(work / "tiny-qwen2-vl"))
    print(f"{args.prompts} prompts x {args.group_size} replies per RL step, {args.accumulation} micro-batches, "
          f"{args.max_new_tokens} new tokens, {args.threads} torch thread(s) per rank, {os.cpu_count()} CPUs")
    medians = {}
    for world_size, sharding in ((1, "none"), (2, "none"), (2, "fsdp2")):
        out = work / f"ranks-{world_size}-{sharding}.json"
        mp.spawn(rank_main, args=(world_size, free_port(), model_dir, args, str(out), sharding), nprocs=world_size)
        seconds = json.loads(out.read_text())
        medians[world_size, sharding] = statistics.median(seconds)
        print(f"{world_size} rank(s), sharding {sharding}: {medians[world_size, sharding]:.3f} s per RL step "
              f"(median of {len(seconds)}; mean {statistics.mean(seconds):.3f}, min {min(seconds):.3f}, "
              f"max {max(seconds):.3f})")
    for sharding in ("none", "fsdp2"):
        ratio = medians[2, sharding] / medians[1, "none"]
        print(f"2 ranks ({sharding}) / 1 rank: {ratio:.2f}x the median time per step")


if __name__ == "__main__":
    main()
