"""Two tries, where RL should beat supervised training: RL on easy-VQA with a second try against a
same-time supervised control, from the same checkpoint.

From ``--start`` (a checkpoint folder; a ``--preset see`` run's final checkpoint is the intended one;
default: the embedded tiny model), per seed:

- **RL**: ``--rl-steps`` GRPO steps (the training defaults, ``kl_coef`` 0, at ``--learning-rate``: the
  ``see`` preset's RL rate, 1e-4, by default) on ``easy_vqa_two_tries``: a
  wrong first answer gets "Incorrect, look again." and a right second answer earns 0.5;
- **control**: supervised steps on the single-turn answers (``--learning-rate``, ``warmup_batch_size``)
  from the same checkpoint for the RL phase's training seconds (at least one step). It never sees a
  revision of an answer; RL is rewarded for one.

Both are then scored greedily on ``--eval-size`` test questions of the two-try task
(``rl.step.multi_turn.two_try_report``): first-try accuracy, accuracy within two tries (each with its
binomial standard error) and how often a wrong first answer is revised to the right one. The start
checkpoint is scored too. Whichever way it comes out is printed, with n.

    python benchmarks/bench_two_tries.py --start data/checkpoints/<see run>/step-830 --seeds 0 1 2
    python benchmarks/bench_two_tries.py --rl-steps 2 --eval-size 16 --seeds 0          # smoke
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import tempfile
import time
from functools import partial
from pathlib import Path

import torch
from quiet_logs import quiet_model_logs

from aerorl_ops.config.presets import PRESETS
from aerorl_ops.config.training import TRAINING_DEFAULTS
from aerorl_ops.envs.registry import make_env
from aerorl_ops.models.embedded_default import build_tiny_qwen2vl
from aerorl_ops.rl.runtime.policy import policy_and_reference
from aerorl_ops.rl.step.multi_turn import TwoTryReport, two_try_report
from aerorl_ops.rl.step.schedule import ItemSampler
from aerorl_ops.rl.step.trainer import RLTrainer


def cell(accuracy: float, n: int) -> str:
    return f"{accuracy:.3f}±{math.sqrt(accuracy * (1 - accuracy) / n):.3f}"


def show(name: str, report: TwoTryReport, seconds: float | None = None) -> None:
    timing = f" after {seconds:.0f} s of training" if seconds is not None else ""
    print(f"   {name:>8}: first try {cell(report.first_try, report.n)}, within two tries "
          f"{cell(report.within_two_tries, report.n)}, wrong first answers revised {report.revised:.3f} "
          f"(n = {report.n}){timing}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--start", default="", help="checkpoint folder (default: the embedded tiny model)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--rl-steps", type=int, default=TRAINING_DEFAULTS.steps)
    parser.add_argument("--eval-size", type=int, default=TRAINING_DEFAULTS.eval_size)
    parser.add_argument("--learning-rate", type=float, default=PRESETS["see"]["learning_rate"],
                        help="RL and control rate (default: the see preset's RL rate)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    args = parser.parse_args()
    quiet_model_logs(args.threads)
    start = args.start or str(build_tiny_qwen2vl(Path(tempfile.mkdtemp(prefix="aerorl-two-tries-")) / "tiny"))
    settings = dataclasses.replace(TRAINING_DEFAULTS, env="easy_vqa_two_tries", kl_coef=0.0,
                                   learning_rate=args.learning_rate)
    test = make_env("easy_vqa_two_tries", split="test", limit=args.eval_size, seed=0)
    held_out = list(range(len(test)))
    start_policy, _ = policy_and_reference(start, settings, device="cpu")
    print(f"== two tries from {start}: {args.rl_steps} RL steps vs a same-time supervised control at lr "
          f"{args.learning_rate}, "
          f"{len(held_out)} held-out questions, seeds {args.seeds}, torch threads {torch.get_num_threads()}")
    show("start", two_try_report(start_policy.loaded, test, held_out, settings.max_new_tokens, None))
    for seed in args.seeds:
        config = dataclasses.replace(settings, seed=seed)
        train = make_env("easy_vqa_two_tries", split="train", seed=seed + 1)
        sampler = ItemSampler(train, seed)
        policy, _ = policy_and_reference(start, config, device="cpu")
        trainer = RLTrainer(config.resolve(), policy)
        rl_seconds = 0.0
        for step in range(args.rl_steps):
            draws = partial(sampler.batch, step, config.prompts_per_step)  # dynamic sampling's further draws
            stats = trainer.rl_step(train, draws(0), draws)
            rl_seconds += stats.step_s
        print(f"-- seed {seed}")
        show("RL", two_try_report(policy.loaded, test, held_out, config.max_new_tokens, None), rl_seconds)
        control, _ = policy_and_reference(start, config, device="cpu")
        supervised = RLTrainer(config.resolve(), control)
        supervised.set_learning_rate(config.learning_rate)
        spent, step = 0.0, 0
        while step == 0 or spent < rl_seconds:
            started = time.perf_counter()
            supervised.supervised_step(train, sampler.batch(10_000 + step, config.warmup_batch_size))
            spent += time.perf_counter() - started
            step += 1
        show("control", two_try_report(control.loaded, test, held_out, config.max_new_tokens, None), spent)


if __name__ == "__main__":
    main()
