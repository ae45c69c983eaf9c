"""Does every RL algorithm learn? Held-out accuracy gains of every algorithm and policy loss, side by side.

Recipes: each algorithm of ``config.algorithms.ALGORITHMS`` (grpo, dr_grpo, rloo, reinforce_pp, ppo, dapo,
gspo) as named, and gmpo, sapo and cispo as grpo with that ``policy_loss``.

Each run is the pipeline's default easy-VQA training (``TRAINING_DEFAULTS``: the same config, plan
and environments as ``aerorl train`` and the ``rl_run`` asset; embedded tiny Qwen2-VL) with only
the algorithm and the seed changed; every algorithm-dependent setting is left unset, so each runs
with its own defaults (``aerorl_ops.config.algorithms``). Per run it prints the held-out accuracy
(greedy; n and binomial standard error) after the supervised warm-up and after RL (final), the
gain final - warm-up with the standard error of the difference, per question type, the
supervised control's accuracy and gain (same training seconds as the RL phase), and wall seconds;
then a summary table, one row per algorithm, with each seed's gain and the RL step at which it
jumped: the first RL step whose rollout accuracy, averaged over the JUMP_WINDOW steps ending there,
exceeds the first JUMP_WINDOW RL steps' by JUMP_BY (None: no jump). DAPO runs also report the share of
sampled groups kept by dynamic sampling and the mean sampling rounds per step. Each run is appended to
``--log`` (JSON lines) as it ends, so a long sweep keeps what it finished.

The standard error of a gain is ``sqrt(SE_warmup^2 + SE_final^2)``, as for two independent
samples; both evaluations score the same held-out questions, so the paired error is smaller and
this one is conservative. A gain counts as learning when it exceeds twice its standard error.

    python benchmarks/bench_rl_algorithms.py --algorithms grpo dapo gspo gmpo sapo cispo --seeds 0 1 2 3 4
    python benchmarks/bench_rl_algorithms.py --algorithms ppo rloo --seeds 0 1 2
    python benchmarks/bench_rl_algorithms.py --warmup-steps 2 --rl-steps 2 --eval-size 16 --seeds 0 --no-control
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import tempfile
import time
from pathlib import Path

import torch
from quiet_logs import quiet_model_logs

from aerorl_ops.config.algorithms import ALGORITHMS
from aerorl_ops.config.training import TRAINING_DEFAULTS, TrainingSettings
from aerorl_ops.eval_metrics.accuracy import Accuracy
from aerorl_ops.models.embedded_default import build_tiny_qwen2vl
from aerorl_ops.rl.record.result import TrainingResult
from aerorl_ops.rl.run.inputs import training_environments
from aerorl_ops.rl.run.phases import run_training

LEARNED_AT = 2.0  # a gain beyond this many standard errors counts as learning
JUMP_WINDOW, JUMP_BY = 5, 0.15
RECIPES: dict[str, dict[str, object]] = {
    **{name: {"algorithm": name} for name in ALGORITHMS},
    **{loss: {"algorithm": "grpo", "policy_loss": loss} for loss in ("gmpo", "sapo", "cispo")},
}
"""Each recipe's settings over the defaults (everything else left to the algorithm)."""


@dataclasses.dataclass(frozen=True)
class Gain:
    """Accuracy after minus before, with the standard error of the difference (independent samples)."""

    before: Accuracy
    after: Accuracy

    @property
    def value(self) -> float:
        return self.after.accuracy - self.before.accuracy

    @property
    def standard_error(self) -> float:
        return math.hypot(self.before.standard_error, self.after.standard_error)

    @property
    def learned(self) -> bool:
        return self.value > LEARNED_AT * self.standard_error

    def __str__(self) -> str:
        return f"{self.value:+.3f}±{self.standard_error:.3f}"


@dataclasses.dataclass(frozen=True)
class RunSummary:
    algorithm: str
    seed: int
    wall_s: float
    warmup: Accuracy
    final: Accuracy
    control: Accuracy | None
    by_type: dict[str, Gain]  # question type -> final - warm-up
    jump_step: int | None  # the RL step (1-based) of the jump in rollout accuracy (module docstring)
    groups_kept: float | None  # share of sampled groups trained on (dynamic sampling)
    rounds: float | None  # mean sampling rounds per RL step

    @property
    def gain(self) -> Gain:
        return Gain(self.warmup, self.final)

    @property
    def control_gain(self) -> Gain | None:
        return Gain(self.warmup, self.control) if self.control else None


def cell(accuracy: Accuracy) -> str:
    return f"{accuracy.accuracy:.3f}±{accuracy.standard_error:.3f} ({accuracy.n})"


def jump_step(accuracies: list[float]) -> int | None:
    """The RL step (1-based) at which the rollout accuracy jumped (module docstring), or None.

    >>> jump_step([0.3] * 5 + [0.3, 0.3, 0.5, 0.6, 0.6, 0.6])  # steps 6-10 average 0.46 > 0.3 + 0.15
    10
    """
    if len(accuracies) < 2 * JUMP_WINDOW:
        return None
    start = sum(accuracies[:JUMP_WINDOW]) / JUMP_WINDOW
    for end in range(2 * JUMP_WINDOW, len(accuracies) + 1):
        if sum(accuracies[end - JUMP_WINDOW:end]) / JUMP_WINDOW > start + JUMP_BY:
            return end
    return None


def summarize(algorithm: str, seed: int, result: TrainingResult, wall_s: float) -> RunSummary:
    warmup, final, control = (result.eval_of(phase) for phase in ("warmup", "final", "control"))
    if warmup is None or final is None:
        raise RuntimeError(f"{algorithm} seed {seed}: the run recorded no warm-up or final evaluation")
    types = sorted(set(warmup.report.by_type) & set(final.report.by_type))
    rl = [step for step in result.steps if step.phase not in ("warmup", "control")]
    sampled = sum(step.groups_sampled or 0 for step in rl)
    return RunSummary(algorithm, seed, wall_s, warmup.report.overall, final.report.overall,
                      control.report.overall if control else None,
                      {t: Gain(warmup.report.by_type[t], final.report.by_type[t]) for t in types},
                      jump_step([step.accuracy or 0.0 for step in rl]),
                      sum(step.groups_kept or 0 for step in rl) / sampled if sampled else None,
                      sum(step.sampling_rounds or 0 for step in rl) / len(rl) if rl else None)


def print_run(run: RunSummary) -> None:
    control = (f"; control {cell(run.control)}, gain {run.control_gain}" if run.control else "")
    print(f"-- {run.algorithm} seed {run.seed} ({run.wall_s:.0f} s): warm-up {cell(run.warmup)}, final "
          f"{cell(run.final)}, gain {run.gain}{' (learned)' if run.gain.learned else ''}{control}; jump at RL "
          f"step {run.jump_step}; groups kept {run.groups_kept:.2f}, {run.rounds:.2f} sampling rounds per step")
    for name, gain in run.by_type.items():
        print(f"   {name:>10}: warm-up {cell(gain.before)} -> final {cell(gain.after)}, gain {gain}")


def print_summary(runs: list[RunSummary]) -> None:
    """One row per algorithm: mean final accuracy and gain over seeds, then each seed's gain."""
    print("\n== summary: held-out accuracy gain over the warm-up checkpoint (final - warm-up ± SE)")
    seeds = sorted({run.seed for run in runs})
    header = (f"{'algorithm':>13} {'final':>7} {'mean gain':>10} " + " ".join(f"{f'seed {s}':>14}" for s in seeds)
              + f" {'control gain':>13} {'learned':>8} {'wall s':>7}  jump steps")
    print(header)
    for algorithm in dict.fromkeys(run.algorithm for run in runs):
        mine = {run.seed: run for run in runs if run.algorithm == algorithm}
        mean = sum(run.gain.value for run in mine.values()) / len(mine)
        final = sum(run.final.accuracy for run in mine.values()) / len(mine)
        controls = [run.control_gain.value for run in mine.values() if run.control_gain]
        control = f"{sum(controls) / len(controls):+.3f}" if controls else "-"
        learned = f"{sum(run.gain.learned for run in mine.values())}/{len(mine)}"
        wall = sum(run.wall_s for run in mine.values()) / len(mine)
        print(f"{algorithm:>13} {final:7.3f} {mean:+10.3f} "
              + " ".join(f"{str(mine[s].gain) if s in mine else '-':>14}" for s in seeds)
              + f" {control:>13} {learned:>8} {wall:7.0f}  "
              + " ".join(str(mine[s].jump_step) if s in mine else "-" for s in seeds))


def run_one(recipe: str, settings: TrainingSettings, base: str, work: Path, device: str) -> RunSummary:
    settings.check_rules("bench_rl_algorithms")
    train_env, held_out = training_environments(settings, settings.seed)
    started = time.perf_counter()
    result = run_training(base, work / f"{recipe}-s{settings.seed}", settings, train_env, held_out,
                          list(range(len(held_out))), device=device, resume=False)
    return summarize(recipe, settings.seed, result, time.perf_counter() - started)


def log_run(path: Path, run: RunSummary) -> None:
    def accuracy(value: Accuracy | None) -> dict[str, float] | None:
        return None if value is None else {"accuracy": value.accuracy, "se": value.standard_error, "n": value.n}

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as log:
        log.write(json.dumps({"recipe": run.algorithm, "seed": run.seed, "wall_s": run.wall_s,
                              "warmup": accuracy(run.warmup), "final": accuracy(run.final),
                              "control": accuracy(run.control), "gain": run.gain.value,
                              "gain_se": run.gain.standard_error, "jump_step": run.jump_step,
                              "groups_kept": run.groups_kept, "rounds": run.rounds}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = TRAINING_DEFAULTS  # the pipeline's training defaults (config [training])
    parser.add_argument("--algorithms", nargs="+", choices=list(RECIPES), default=list(ALGORITHMS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--warmup-steps", type=int, default=defaults.warmup_steps)
    parser.add_argument("--rl-steps", type=int, default=defaults.steps)
    parser.add_argument("--eval-size", type=int, default=defaults.eval_size, help="held-out questions")
    parser.add_argument("--no-control", action="store_true", help="skip the supervised control phase")
    parser.add_argument("--base-model", default="", help="checkpoint directory (default: the embedded tiny model)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--log", type=Path, default=Path(__file__).resolve().parents[1] / "reports"
                        / "bench_rl_algorithms.jsonl", help="append one JSON line per finished run here")
    args = parser.parse_args()
    quiet_model_logs(args.threads)
    work = Path(tempfile.mkdtemp(prefix="aerorl-bench-rl-algorithms-"))
    base = args.base_model or str(build_tiny_qwen2vl(work / "tiny-qwen2-vl"))
    print(f"== {len(args.algorithms)} algorithms x seeds {args.seeds}: {args.warmup_steps} warm-up steps + "
          f"{args.rl_steps} RL steps on {defaults.env}, {args.eval_size} held-out questions; device {args.device}, "
          f"torch threads {torch.get_num_threads()}")
    runs = []
    for algorithm in args.algorithms:
        for seed in args.seeds:
            settings = dataclasses.replace(defaults, **RECIPES[algorithm], seed=seed, warmup_steps=args.warmup_steps,
                                           steps=args.rl_steps, eval_size=args.eval_size,
                                           control=defaults.control and not args.no_control,
                                           sampled_eval_size=0)  # MAYE's evals change no training, cost time
            runs.append(run_one(algorithm, settings, base, work, args.device))
            print_run(runs[-1])
            log_run(args.log, runs[-1])
    print_summary(runs)


if __name__ == "__main__":
    main()
