"""Synchronous against one-step off-policy rollouts: wall time of the same short RL run.

The run is the embedded default's (the tiny Qwen2-VL built locally, easy-VQA questions): ``--steps`` RL
steps of ``--prompts`` prompts x ``--group`` replies, no reference (``kl_coef = 0``), from the same
weights each time, once with ``rollout_mode = "sync"`` and once with ``"one_step_off"`` (each step told
the next one's prompts, as a training run tells it, so step k+1 is sampled in a worker thread while step k
updates: ``rl.step.rollout_ahead``). Repeats alternate the two modes (and which goes first), after one
warm-up of each; the figures are the medians of the wall times and their ratio, of each run's seconds
inside sampling (in the trainer's thread and in the worker) and inside updates, the share of a sync run
spent sampling, and the load average.

What bounds the ratio: at best the sampling of every step but the first hides behind an update, so a
one-step-off run takes about (1 - sampling share x (steps - 1) / steps) of the sync run's time, plus what
one-step-off adds (a copy of the weights per step and a log-prob pass of the behaviour weights). Here
the worker and the update are two threads of one process on the same few cores: torch halves its
intra-op threads for the overlap (``--threads 1`` leaves one each, so one-step-off uses two cores where
sync uses one), and the GIL serialises the Python between kernels, of which a model this small is
mostly made. On a GPU the engine samples on its own hardware.

    python benchmarks/bench_rollout_modes.py --quick     # seconds
    python benchmarks/bench_rollout_modes.py             # 4 steps x 4 prompts x 4 replies, 3 repeats
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from aerorl_ops.cpu_threads import configure_cpu_threads  # noqa: E402

configure_cpu_threads()  # OMP_WAIT_POLICY=PASSIVE unless set: OpenMP reads it when torch loads it

import torch  # noqa: E402
from quiet_logs import quiet_model_logs  # noqa: E402

from aerorl_ops.config.training import ROLLOUT_MODES, TrainingSettings  # noqa: E402
from aerorl_ops.envs.registry import make_env  # noqa: E402
from aerorl_ops.models.embedded_default import build_tiny_qwen2vl  # noqa: E402
from aerorl_ops.rl.runtime.policy import policy_and_reference  # noqa: E402
from aerorl_ops.rl.step import rollout_ahead  # noqa: E402
from aerorl_ops.rl.step import trainer as trainer_module  # noqa: E402
from aerorl_ops.rl.step.trainer import RLTrainer  # noqa: E402

MODEL_DIR = Path(__file__).resolve().parents[1] / "data" / "models" / "tiny-qwen2-vl"


@dataclass
class Run:
    """One run's wall seconds and the seconds inside each kind of work (summed over its steps)."""

    wall: float
    sampling: float  # step_rollout in the trainer's thread (sync: every step; one_step_off: the first)
    worker: float  # step_rollout in the worker thread (one_step_off: every step but the first)
    updates: float  # RLTrainer._update


@contextmanager
def clocked(spent: dict[str, list[float]]):
    """Appends the seconds of every sampling (trainer thread, worker) and every update to ``spent``."""
    patched = [(trainer_module, "step_rollout", "sampling"), (rollout_ahead, "step_rollout", "worker"),
               (RLTrainer, "_update", "updates")]
    originals = [getattr(owner, name) for owner, name, _ in patched]

    def timed(function, key: str):
        def run(*args, **kwargs):
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[key].append(time.perf_counter() - started)  # appending needs no lock
        return run

    for (owner, name, key), original in zip(patched, originals, strict=True):
        setattr(owner, name, timed(original, key))
    try:
        yield
    finally:
        for (owner, name, _), original in zip(patched, originals, strict=True):
            setattr(owner, name, original)


def run_once(mode: str, args: argparse.Namespace, env) -> Run:
    """``args.steps`` RL steps in ``mode``, from freshly loaded weights (loading not timed)."""
    settings = TrainingSettings(group_size=args.group, prompts_per_step=args.prompts, max_new_tokens=args.tokens,
                                kl_coef=0.0, seed=0, learning_rate=1e-3, rollout_mode=mode)
    policy, _ = policy_and_reference(str(MODEL_DIR), settings, device="cpu")
    trainer = RLTrainer(settings.resolve(), policy)

    def draws(step: int):
        return lambda r: [(step * args.prompts + k + 7 * r) % len(env) for k in range(args.prompts)]

    spent: dict[str, list[float]] = {"sampling": [], "worker": [], "updates": []}
    started = time.perf_counter()
    with clocked(spent):
        for step in range(args.steps):
            following = draws(step + 1) if step + 1 < args.steps else None
            trainer.rl_step(env, draws(step)(0), draws(step), following)
    return Run(time.perf_counter() - started, **{key: sum(values) for key, values in spent.items()})


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
        run_once(mode, argparse.Namespace(**{**vars(args), "steps": 1}), env)
    runs: dict[str, list[Run]] = {mode: [] for mode in ROLLOUT_MODES}
    load_before = os.getloadavg()
    for repeat in range(args.repeats):
        for mode in ROLLOUT_MODES if repeat % 2 == 0 else ROLLOUT_MODES[::-1]:
            runs[mode].append(run_once(mode, args, env))
    load_after = os.getloadavg()
    print(f"{args.steps} RL steps of {args.prompts} prompts x {args.group} replies, {args.repeats} repeats, "
          f"{args.threads} torch thread(s); load average (1, 5, 15 min) before "
          f"{', '.join(f'{x:.2f}' for x in load_before)}, after {', '.join(f'{x:.2f}' for x in load_after)}")
    medians = {}
    for mode, done in runs.items():
        median = {field: statistics.median(getattr(run, field) for run in done) for field in Run.__annotations__}
        medians[mode] = median
        print(f"  {mode:>12}: {median['wall']:6.2f} s (median; all: {', '.join(f'{r.wall:.2f}' for r in done)}); "
              f"inside it: sampling {median['sampling']:.2f} s here + {median['worker']:.2f} s in the worker, "
              f"updates {median['updates']:.2f} s")
    share = medians["sync"]["sampling"] / medians["sync"]["wall"]
    print(f"  sync's sampling share: {share:.2f} (the most one-step-off could hide: "
          f"{share * (args.steps - 1) / args.steps:.2f} of sync's time)")
    print(f"  one_step_off / sync: {medians['one_step_off']['wall'] / medians['sync']['wall']:.3f}")


if __name__ == "__main__":
    main()
