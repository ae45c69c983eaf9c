"""Synchronous against one-step off-policy rollouts: wall time of the same short RL run.

The run is the embedded default's (the tiny Qwen2-VL built locally, easy-VQA questions): ``--steps`` RL
steps of ``--prompts`` prompts x ``--group`` replies, no reference (``kl_coef = 0``), from the same
weights each time, once with ``rollout_mode = "sync"`` and once with ``"one_step_off"``. Repeats
alternate the two modes (and which goes first), after one warm-up of each; the figures are the medians
of the measured wall times and their ratio, nothing else.

Why little or no speed-up is expected here: one-step-off only pays when sampling and the update run on
different hardware at once (on a GPU cluster, the rollout engine generating step k+1 while the trainer
updates step k). On this CPU the trainer samples step k+1 after step k's update (a sampling thread would
share torch's global RNG and, above all, the same few cores as the update, so the two would only take
turns), and one-step-off adds work: a copy of the weights per step and a log-prob pass of the behaviour
weights. Expect a ratio near 1, a little above.

    python benchmarks/bench_rollout_modes.py --quick     # seconds
    python benchmarks/bench_rollout_modes.py             # 4 steps x 4 prompts x 4 replies, 3 repeats
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from quiet_logs import quiet_model_logs  # noqa: E402

from aerorl_ops.config.training import ROLLOUT_MODES, TrainingSettings  # noqa: E402
from aerorl_ops.envs.registry import make_env  # noqa: E402
from aerorl_ops.models.embedded_default import build_tiny_qwen2vl  # noqa: E402
from aerorl_ops.rl.runtime.policy import policy_and_reference  # noqa: E402
from aerorl_ops.rl.step.trainer import RLTrainer  # noqa: E402

MODEL_DIR = Path(__file__).resolve().parents[1] / "data" / "models" / "tiny-qwen2-vl"


def run_seconds(mode: str, args: argparse.Namespace, env) -> float:
    """Wall seconds of ``args.steps`` RL steps in ``mode``, from freshly loaded weights (loading not timed)."""
    settings = TrainingSettings(group_size=args.group, prompts_per_step=args.prompts, max_new_tokens=args.tokens,
                                kl_coef=0.0, seed=0, learning_rate=1e-3, rollout_mode=mode)
    policy, _ = policy_and_reference(str(MODEL_DIR), settings, device="cpu")
    trainer = RLTrainer(settings, policy)
    started = time.perf_counter()
    for step in range(args.steps):
        trainer.rl_step(env, [(step * args.prompts + k) % len(env) for k in range(args.prompts)])
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=8, help="max_new_tokens")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (fixed, for stable numbers)")
    parser.add_argument("--quick", action="store_true", help="2 steps x 2 prompts x 2 replies, 1 repeat")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.prompts, args.group, args.tokens, args.repeats = 2, 2, 2, 4, 1
    torch.set_num_threads(args.threads)
    quiet_model_logs()
    build_tiny_qwen2vl(MODEL_DIR)
    env = make_env("easy_vqa", split="train", limit=max(64, args.steps * args.prompts), seed=1)
    for mode in ROLLOUT_MODES:  # warm-up
        run_seconds(mode, argparse.Namespace(**{**vars(args), "steps": 1}), env)
    times: dict[str, list[float]] = {mode: [] for mode in ROLLOUT_MODES}
    for repeat in range(args.repeats):
        for mode in ROLLOUT_MODES if repeat % 2 == 0 else ROLLOUT_MODES[::-1]:
            times[mode].append(run_seconds(mode, args, env))
    medians = {mode: statistics.median(values) for mode, values in times.items()}
    print(f"{args.steps} RL steps of {args.prompts} prompts x {args.group} replies, {args.repeats} repeats, "
          f"{args.threads} torch thread(s)")
    for mode, median in medians.items():
        print(f"  {mode:>12}: {median:7.2f} s (median; all: {', '.join(f'{t:.2f}' for t in times[mode])})")
    print(f"  one_step_off / sync: {medians['one_step_off'] / medians['sync']:.3f}")


if __name__ == "__main__":
    main()
