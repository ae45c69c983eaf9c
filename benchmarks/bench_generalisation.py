"""Does RL generalise where supervised training memorises? Both from one warm-up checkpoint, on the same CPU
time, scored on the training distribution and on held-out ones (issue 41; MAYE, Chu et al. 2025).

Task: MiniGrid through the model's eyes (``kind = "gymnasium"``: each turn shows the rendered grid, the reply
is one of ``left / right / forward``; the environment's own reward, 1 - 0.9 x steps / max_steps on reaching
the goal and 0 otherwise, at the turn that reaches it; no shaping). Everything below is fixed here, before any
run (``RECIPES``); nothing is chosen after the held-out scores are seen.

1. **Warm-up** (shared): the embedded tiny model (random init), ``warmup_steps`` supervised steps on the
   planner's shortest paths of ``TRAIN`` episodes (``envs.minigrid_planner``; every turn's reply taught,
   ``rl.step.rollout.supervised_batch``), so that RL starts from partial success and gets a signal.
2. Per seed, from that checkpoint, two arms in their own processes (one torch thread each, run side by side),
   each trained until its process has spent ``arm_cpu_s`` CPU seconds in training steps (``time.process_time``:
   fair on shared cores, where wall time is not):
   - **sft**: supervised steps on the planner's paths of the training distribution (the right answers);
   - **rl**: DAPO (GRPO advantages, dynamic sampling: groups whose replies all scored the same are dropped and
     more prompts sampled, up to ``max_sampling_rounds`` rounds), ``group_size`` episodes per prompt,
     ``kl_coef`` 0, no overlong shaping. The kept / sampled groups of every step are recorded.
3. Every policy (the warm-up's and each arm's) plays ``eval_episodes`` greedy episodes of each distribution
   (``rl.step.episode_evaluation.evaluate_episodes``: success rate, mean return, mean turns, each with its
   standard error), the same episodes for every policy:
   - ``in_distribution``: held-out episodes (split ``test``) of the training grid, ``Empty-Random-5x5``: start
     cells and directions all seen in training, the episodes unseen;
   - ``random_6x6``: ``Empty-Random-6x6``, a larger room with start cells that the 5x5 room does not have;
   - ``random_8x8``: ``Empty-8x8`` with random starts (``agent_start_pos`` None), larger still, paths up to 12;
   - ``lava_gap_6``: ``LavaGapS6``, another layout family (a lava wall with one gap; stepping in lava ends the
     episode with 0; its mission text differs), only 8 distinct layouts.
   Each cell also counts its distinct start frames: a greedy policy answers one frame one way, so a
   distribution with few distinct starts has far fewer independent outcomes than episodes.
4. The verdict per distribution: "RL generalises better here" when RL beats the supervised arm by more than two
   standard errors of the difference on most seeds (2 of 3), and the converse for supervised training;
   otherwise neither. The reward-hacking guard (``reporting.reward_hacking``) judges each RL arm on its step
   rewards against its in-distribution success before and after.

``--task easy_vqa``: the same design on easy-VQA split by (shape, colour) pair (``envs.easy_vqa_combinations``,
8 of the 24 pairs held out with seed 0, every shape and colour seen in training, never together). The warm-up is
supervised steps on the training pairs' questions (three quarters colour and shape questions for its first two
thirds), the sft arm continues on their right answers, the rl arm is DAPO on them (``group_size`` replies per
question, reward: exact match). Scored greedily on ``eval_questions`` test questions of the training pairs
(``in_distribution``) and of the held-out pairs (``held_out_pairs``); the verdict's measure, fixed here, is the
accuracy on colour and shape questions (those the image answers; yes/no questions are mostly their text's
prior), reported beside the overall and per-type accuracies.

Every record (warm-up, arm, evaluation) is appended to ``--log`` (``reports/bench_generalisation.jsonl``) as it
is made, tagged with ``--run-name``; a rerun with the same name skips the records already there, so an
interrupted run resumes. The table is printed from the log.

    python benchmarks/bench_generalisation.py                       # the docs/measured.md run (2 CPU cores)
    python benchmarks/bench_generalisation.py --task easy_vqa       # the compositional easy-VQA run
    python benchmarks/bench_generalisation.py --recipe smoke        # a minute: the path, not the result
    python benchmarks/bench_generalisation.py --recipe gpu --device cuda   # the same experiment, larger, on a GPU
    python benchmarks/bench_generalisation.py --recipe cpu-rl-lr1e-4 --reuse-from cpu --arms rl   # the lr diagnosis
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from quiet_logs import quiet_model_logs

from aerorl_ops.config.curriculum import parse_curriculum
from aerorl_ops.config.training import TRAINING_DEFAULTS, TrainingSettings
from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.envs.gymnasium_env import GymnasiumEnv
from aerorl_ops.envs.registry import make_env
from aerorl_ops.eval_runner.held_out import evaluate_policy
from aerorl_ops.models.embedded_default import build_tiny_qwen2vl
from aerorl_ops.reporting.reward_hacking import HeldOutAccuracy, reward_hacking_verdict
from aerorl_ops.rl.runtime.policy import policy_and_reference
from aerorl_ops.rl.step.episode_evaluation import evaluate_episodes
from aerorl_ops.rl.step.schedule import ItemSampler
from aerorl_ops.rl.step.trainer import RLTrainer

ACTIONS = ("left", "right", "forward")
TEMPLATE = "{mission}. Reply with one action: {actions}."
"""No turn count: the reply must come from the frame (and the conversation so far), and a larger room's later
turns read like the training room's."""
TILE_SIZE = 8
TRAIN = ("MiniGrid-Empty-Random-5x5-v0", {}, 10)
"""The training distribution: env id, extra ``gymnasium.make`` keywords, turns per episode at most."""
DISTRIBUTIONS = {
    "in_distribution": ("MiniGrid-Empty-Random-5x5-v0", {}, 10),
    "random_6x6": ("MiniGrid-Empty-Random-6x6-v0", {}, 12),
    "random_8x8": ("MiniGrid-Empty-8x8-v0", {"agent_start_pos": None}, 12),
    "lava_gap_6": ("MiniGrid-LavaGapS6-v0", {}, 12),
}
"""Evaluated distributions, each drawn from split ``test`` with seed 0 (never a training episode's seed)."""
PAIR_DISTRIBUTIONS = {"in_distribution": "train", "held_out_pairs": "held_out"}
"""easy-VQA: test questions on the training pairs' images, and on the held-out pairs' (``combinations``)."""
IMAGE_TYPES = ("colour", "shape")
"""easy-VQA: the question types whose answer is the image's pair (the verdict's measure)."""
WARMUP_CURRICULUM = "200: colour,shape @ 0.75"
ROOT = Path(__file__).resolve().parents[1]


@dataclasses.dataclass(frozen=True)
class Recipe:
    """Every size of one experiment, fixed before it runs."""

    seeds: tuple[int, ...]
    warmup_steps: int  # supervised steps of `episodes_per_step` items before the arms split
    arm_cpu_s: float  # CPU seconds of training steps each arm gets
    eval_episodes: int  # greedy episodes (MiniGrid) or questions (easy-VQA) per distribution and policy
    train_episodes: int = 4096  # training items (split train) the arms and the warm-up draw from; 0 = all
    episodes_per_step: int = 16  # supervised items per step (warm-up and the sft arm)
    prompts_per_step: int = 4  # RL: prompts per step (each a group of group_size episodes)
    group_size: int = 8
    max_sampling_rounds: int = 4
    learning_rate: float = TRAINING_DEFAULTS.learning_rate  # RL (1e-3)
    sft_learning_rate: float = TRAINING_DEFAULTS.warmup_learning_rate  # warm-up and sft arm (1e-3)
    max_new_tokens: int = 8  # per reply: 'forward' is 5 tokens + the end of turn
    threads: int = 1  # torch threads per arm process


RECIPES = {
    "minigrid": {
        "cpu": Recipe(seeds=(0, 1, 2), warmup_steps=50, arm_cpu_s=300.0, eval_episodes=200),
        "smoke": Recipe(seeds=(0,), warmup_steps=2, arm_cpu_s=5.0, eval_episodes=4, train_episodes=32),
        "gpu": Recipe(seeds=(0, 1, 2), warmup_steps=50, arm_cpu_s=1800.0, eval_episodes=500, prompts_per_step=16,
                      group_size=16, max_sampling_rounds=10, threads=4),
        "cpu-rl-lr1e-4": Recipe(seeds=(0, 1, 2), warmup_steps=50, arm_cpu_s=300.0, eval_episodes=200,
                                learning_rate=1e-4),
    },
    "easy_vqa": {
        "cpu": Recipe(seeds=(0, 1, 2), warmup_steps=300, arm_cpu_s=150.0, eval_episodes=1500, train_episodes=0,
                      prompts_per_step=16, max_new_tokens=4),
        "smoke": Recipe(seeds=(0,), warmup_steps=2, arm_cpu_s=3.0, eval_episodes=16, train_episodes=64,
                        prompts_per_step=2, max_new_tokens=4),
        "gpu": Recipe(seeds=(0, 1, 2), warmup_steps=300, arm_cpu_s=900.0, eval_episodes=3000, train_episodes=0,
                      prompts_per_step=32, group_size=16, max_sampling_rounds=10, max_new_tokens=4, threads=4),
    },
}
"""MiniGrid ``cpu``: the docs/measured.md run on this project's 2-core machine (each arm 5 CPU minutes of training,
cut from 7 while the warm-up ran, before any score, when the shared cores gave the run a third of one; the warm-up
at partial success: 50 steps reached 0.19 on training-split episodes in a calibration run, 100 steps 1.0).
easy-VQA ``cpu``: a 300-step warm-up (the embedded easy-VQA build reads colour after 500), arms of 2.5 CPU minutes
(about the RL phase of the default ``aerorl train``), 1,500 questions per distribution (about 200 each of colour
and shape). ``gpu``: the same experiments with 6x the arm budget, larger RL batches and more evaluation items.
MiniGrid ``cpu-rl-lr1e-4`` (with ``--reuse-from cpu``): a diagnosis, designed after ``cpu``'s seed 0 was seen (its
RL arm's reward fell to 0 after two updates at lr 1e-3 and never came back: no group informative): the same run with
RL at lr 1e-4, its warm-up and sft arms those of ``cpu`` (nothing else differs)."""


def grid(env_id: str, kwargs: dict, turns: int, split: str, limit: int, seed: int) -> GymnasiumEnv:
    return make_env("gymnasium", env_id=env_id, actions=list(ACTIONS), split=split, limit=limit, seed=seed,
                    max_turns=turns, observation_template=TEMPLATE, env_kwargs={"tile_size": TILE_SIZE, **kwargs})


def train_env(task: str, recipe: Recipe, seed: int) -> TaskEnv:
    if task == "easy_vqa":
        return make_env("easy_vqa_combinations", split="train", limit=recipe.train_episodes or None, seed=seed,
                        name="seen_pairs", combinations="train")
    env_id, kwargs, turns = TRAIN
    return grid(env_id, kwargs, turns, "train", recipe.train_episodes, 1000 + seed)


def distribution_envs(task: str, recipe: Recipe) -> dict[str, TaskEnv]:
    if task == "easy_vqa":
        return {name: make_env("easy_vqa_combinations", split="test", limit=recipe.eval_episodes, seed=0, name=name,
                               combinations=side) for name, side in PAIR_DISTRIBUTIONS.items()}
    return {name: grid(env_id, kwargs, turns, "test", recipe.eval_episodes, 0)
            for name, (env_id, kwargs, turns) in DISTRIBUTIONS.items()}


def settings_of(recipe: Recipe, seed: int) -> TrainingSettings:
    return dataclasses.replace(
        TRAINING_DEFAULTS, algorithm="dapo", kl_coef=0.0, overlong_buffer=0, group_size=recipe.group_size,
        prompts_per_step=recipe.prompts_per_step, max_new_tokens=recipe.max_new_tokens,
        max_sampling_rounds=recipe.max_sampling_rounds, learning_rate=recipe.learning_rate,
        warmup_learning_rate=recipe.sft_learning_rate, warmup_batch_size=recipe.episodes_per_step, seed=seed)


def append(log: Path, record: dict) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")


def records(log: Path, run_name: str) -> list[dict]:
    if not log.exists():
        return []
    return [r for r in map(json.loads, log.read_text(encoding="utf-8").splitlines()) if r.get("run") == run_name]


# ----- one policy's evaluation -----
def evaluate(loaded, task: str, recipe: Recipe) -> dict[str, dict]:
    """Every distribution, greedy: MiniGrid's success, return and turns with standard errors and its distinct
    starts; easy-VQA's accuracy on colour and shape questions (``success``), overall and per type."""
    cells = {}
    for name, env in distribution_envs(task, recipe).items():
        started = time.process_time()
        if task == "easy_vqa":
            cells[name] = question_cell(evaluate_policy(loaded, env, range(len(env)), recipe.max_new_tokens, 0,
                                                        "eval"))
        else:
            result = evaluate_episodes(loaded, env, range(len(env)), recipe.max_new_tokens, 0, "eval",
                                       distribution=name)
            report = result.episodes
            cells[name] = {"n": report.n, "success": report.success, "success_se": report.success_stderr,
                           "return": report.mean_return, "return_se": report.return_stderr,
                           "turns": report.mean_turns, "turns_se": report.turns_stderr,
                           "distinct_starts": len({item.images[0] for item in env.items})}
        cells[name]["eval_cpu_s"] = time.process_time() - started
    return cells


def question_cell(result) -> dict:
    """easy-VQA: the colour and shape questions' accuracy as ``success`` (n, SE), overall and each type's."""
    by_type = result.report.by_type
    correct = sum(by_type[kind].correct for kind in IMAGE_TYPES if kind in by_type)
    n = sum(by_type[kind].n for kind in IMAGE_TYPES if kind in by_type)
    rate = correct / n
    overall = result.report.overall
    return {"n": n, "success": rate, "success_se": math.sqrt(rate * (1 - rate) / n),
            "overall": overall.accuracy, "overall_se": overall.standard_error, "overall_n": overall.n,
            "by_type": {kind: [value.accuracy, value.standard_error, value.n] for kind, value in by_type.items()}}


# ----- the stages, each in its own process -----
def warmup(args: argparse.Namespace, recipe: Recipe) -> None:
    """Build the tiny model, train the warm-up, save it, evaluate it."""
    start = build_tiny_qwen2vl(Path(tempfile.mkdtemp(prefix="aerorl-generalisation-")) / "tiny")
    settings = settings_of(recipe, 0)
    policy, _ = policy_and_reference(str(start), settings, device=args.device)
    trainer = RLTrainer(settings.resolve(), policy)
    train = train_env(args.task, recipe, 0)
    trainer.set_learning_rate(recipe.sft_learning_rate)
    if args.task == "easy_vqa":  # colour and shape questions first, as the embedded easy-VQA build does
        sampler = ItemSampler(train, 0, parse_curriculum(WARMUP_CURRICULUM))
        batches = (sampler.batch(step, recipe.episodes_per_step) for step in range(recipe.warmup_steps))
    else:
        draw = random.Random(0)
        batches = (draw.sample(range(len(train)), recipe.episodes_per_step) for _ in range(recipe.warmup_steps))
    began, losses = time.process_time(), []
    for batch in batches:
        losses.append(trainer.supervised_step(train, batch).loss)
    cpu_s = time.process_time() - began
    folder = trainer.save_checkpoint(Path(args.work) / "warmup", str(start), False)
    append(args.log, {"run": args.run_name, "kind": "warmup", "checkpoint": str(folder), "steps": recipe.warmup_steps,
                      "cpu_s": cpu_s, "loss_first": losses[0] if losses else None,
                      "loss_last": losses[-1] if losses else None,
                      "cells": evaluate(policy.loaded, args.task, recipe)})


def arm(args: argparse.Namespace, recipe: Recipe) -> None:
    """Train one arm from the warm-up checkpoint for ``arm_cpu_s`` CPU seconds, then evaluate it."""
    warm = next(r for r in records(args.log, args.run_name) if r["kind"] == "warmup")
    settings = settings_of(recipe, args.seed)
    policy, _ = policy_and_reference(warm["checkpoint"], settings, device=args.device)
    trainer = RLTrainer(settings.resolve(), policy)
    train, draw = train_env(args.task, recipe, args.seed), random.Random(args.seed)
    trainer.set_learning_rate(recipe.learning_rate if args.arm == "rl" else recipe.sft_learning_rate)
    step: Callable[[], object] = (
        (lambda: trainer.rl_step(train, draw.sample(range(len(train)), recipe.prompts_per_step),
                                 lambda _: draw.sample(range(len(train)), recipe.prompts_per_step)))
        if args.arm == "rl" else
        (lambda: trainer.supervised_step(train, draw.sample(range(len(train)), recipe.episodes_per_step))))
    spent, wall, steps = 0.0, time.perf_counter(), []
    while spent < recipe.arm_cpu_s:
        began = time.process_time()
        stats = step()
        spent += time.process_time() - began
        steps.append({"loss": stats.loss, "reward": stats.reward_mean, "accuracy": stats.accuracy,
                      "groups_sampled": stats.groups_sampled, "groups_kept": stats.groups_kept,
                      "rounds": stats.sampling_rounds, "cpu_s": spent})
    wall = time.perf_counter() - wall
    episodes = (sum(s["groups_sampled"] for s in steps) * recipe.group_size if args.arm == "rl"
                else len(steps) * recipe.episodes_per_step)
    append(args.log, {"run": args.run_name, "kind": "arm", "arm": args.arm, "seed": args.seed, "cpu_s": spent,
                      "wall_s": wall, "steps": steps, "episodes": episodes,
                      "cells": evaluate(policy.loaded, args.task, recipe)})


def launch(args: argparse.Namespace, stage: list[str]) -> None:
    command = [sys.executable, __file__, "--task", args.task, "--recipe", args.recipe, "--run-name", args.run_name,
               "--log", str(args.log), "--work", args.work, "--device", args.device, *stage]
    subprocess.run(command, check=True, cwd=ROOT)


def reuse(args: argparse.Namespace, recipe: Recipe) -> None:
    """Copy run ``--reuse-from``'s warm-up and the arms that ``recipe`` trains as it did (the same sizes but the RL
    learning rate: its sft arms) into this run, each marked with where it came from; those copied before, or
    trained here, are not copied again."""
    source = RECIPES[args.task][args.reuse_from]
    same_sft = dataclasses.replace(source, learning_rate=recipe.learning_rate) == recipe
    have = {(r["kind"], r.get("arm"), r.get("seed")) for r in records(args.log, args.run_name)}
    for record in records(args.log, args.reuse_from):
        wanted = record["kind"] == "warmup" or (same_sft and record.get("arm") == "sft")
        if wanted and (record["kind"], record.get("arm"), record.get("seed")) not in have:
            append(args.log, {**record, "run": args.run_name, "reused_from": args.reuse_from})


def main_run(args: argparse.Namespace, recipe: Recipe) -> None:
    began = time.perf_counter()
    if args.reuse_from:
        reuse(args, recipe)
    done = records(args.log, args.run_name)
    if not any(r["kind"] == "warmup" for r in done):
        launch(args, ["--stage", "warmup"])
    finished = {(r["arm"], r["seed"]) for r in records(args.log, args.run_name) if r["kind"] == "arm"}
    jobs = [(name, seed) for seed in args.seeds or recipe.seeds for name in args.arms if (name, seed) not in finished]
    with ThreadPoolExecutor(max_workers=2) as pool:  # the two arms of a seed side by side, one thread each
        list(pool.map(lambda job: launch(args, ["--stage", "arm", "--arm", job[0], "--seed", str(job[1])]), jobs))
    if args.reuse_from:  # what the other run finished meanwhile
        reuse(args, recipe)
    print(f"== {time.perf_counter() - began:.0f} s wall (this invocation)")
    print_table(records(args.log, args.run_name), args.task, recipe)


# ----- the table and the verdict -----
def cell_text(cell: dict) -> str:
    return f"{cell['success']:.3f} ± {cell['success_se']:.3f}"


def difference(rl: dict, sft: dict) -> tuple[float, float]:
    """RL minus supervised success, and the standard error of the difference (independent samples)."""
    return rl["success"] - sft["success"], math.sqrt(rl["success_se"] ** 2 + sft["success_se"] ** 2)


def verdict(rows: list[tuple[dict, dict]]) -> str:
    """What the seeds say for one distribution (module docstring, step 4)."""
    majority = len(rows) // 2 + 1
    rl_wins = sum(d > 2 * se for d, se in (difference(rl, sft) for rl, sft in rows))
    sft_wins = sum(-d > 2 * se for d, se in (difference(rl, sft) for rl, sft in rows))
    if rl_wins >= majority:
        return f"RL generalises better here ({rl_wins} of {len(rows)} seeds beyond 2 SE)"
    if sft_wins >= majority:
        return f"supervised better ({sft_wins} of {len(rows)} seeds beyond 2 SE)"
    return f"neither (RL ahead beyond 2 SE on {rl_wins}, supervised on {sft_wins} of {len(rows)} seeds)"


def print_table(log: list[dict], task: str, recipe: Recipe) -> None:
    warm = next((r for r in log if r["kind"] == "warmup"), None)
    arms = {(r["arm"], r["seed"]): r for r in log if r["kind"] == "arm"}
    if warm is None:
        return
    seeds = [seed for seed in recipe.seeds if ("rl", seed) in arms and ("sft", seed) in arms]
    names = list(warm["cells"])
    print(f"warm-up: {warm['steps']} supervised steps, {warm['cpu_s']:.0f} CPU s, NLL {warm['loss_first']:.2f} -> "
          f"{warm['loss_last']:.2f}")
    for seed in seeds:
        rl, sft = arms[("rl", seed)], arms[("sft", seed)]
        kept = sum(s["groups_kept"] for s in rl["steps"]) / max(sum(s["groups_sampled"] for s in rl["steps"]), 1)
        rounds = sum(s["rounds"] for s in rl["steps"]) / len(rl["steps"])
        rewards = [s["reward"] for s in rl["steps"]]
        guard = reward_hacking_verdict(rewards, [
            HeldOutAccuracy(0, warm["cells"]["in_distribution"]["success"], warm["cells"]["in_distribution"]["n"]),
            HeldOutAccuracy(len(rewards), rl["cells"]["in_distribution"]["success"],
                            rl["cells"]["in_distribution"]["n"])])
        print(f"seed {seed}: rl {len(rl['steps'])} steps ({rl['episodes']} episodes, {rl['cpu_s']:.0f} CPU s, "
              f"{rl['wall_s']:.0f} s wall; groups kept {kept:.2f} of sampled, {rounds:.2f} rounds a step; reward "
              f"{rewards[0]:.3f} -> {rewards[-1]:.3f}; reward hacking: {'FLAGGED' if guard.gamed else 'no'}), "
              f"sft {len(sft['steps'])} steps ({sft['episodes']} episodes, {sft['cpu_s']:.0f} CPU s, "
              f"{sft['wall_s']:.0f} s wall; NLL {sft['steps'][0]['loss']:.3f} -> {sft['steps'][-1]['loss']:.3f})")
    measure = "colour + shape accuracy" if task == "easy_vqa" else "success"
    print(f"{measure}, each ± its standard error:")
    starts = "distinct starts | " if task != "easy_vqa" else ""
    print(f"| distribution | {starts}warm-up | " + " | ".join(
        f"sft seed {s} | rl seed {s} | rl - sft (SE)" for s in seeds) + " | verdict |")
    print("|---" * (3 + bool(starts) + 3 * len(seeds)) + "|")
    for name in names:
        rows = [(arms[("rl", s)]["cells"][name], arms[("sft", s)]["cells"][name]) for s in seeds]
        parts = [f"{cell_text(sft)} | {cell_text(rl)} | {d:+.3f} ({se:.3f})"
                 for (rl, sft), (d, se) in zip(rows, (difference(rl, sft) for rl, sft in rows), strict=True)]
        first = warm["cells"][name]
        distinct = f"{first['distinct_starts']} | " if starts else ""
        print(f"| {name} (n = {first['n']}) | {distinct}{cell_text(first)} | " + " | ".join(parts)
              + f" | {verdict(rows) if rows else '-'} |")
    print_extras(warm, arms, seeds, names, task)


def print_extras(warm: dict, arms: dict, seeds: list[int], names: list[str], task: str) -> None:
    """MiniGrid: mean turns and mean return; easy-VQA: overall and per-type accuracy, each with its SE."""
    shown_by = [("warm-up", warm)] + [(f"{a} {s}", arms[(a, s)]) for s in seeds for a in ("sft", "rl")]
    if task == "easy_vqa":
        print("overall accuracy (SE, n) and per type (accuracy, n):")
        for name in names:
            print(f"  {name}: " + "; ".join(
                f"{who} {c['overall']:.3f} ({c['overall_se']:.3f}, {c['overall_n']}) "
                + " ".join(f"{kind} {value[0]:.3f}/{value[2]}" for kind, value in sorted(c["by_type"].items()))
                for who, c in ((who, r["cells"][name]) for who, r in shown_by)))
        return
    print("mean turns (SE) and mean return (SE):")
    for name in names:
        print(f"  {name}: " + "; ".join(f"{who} {c['turns']:.2f} ({c['turns_se']:.2f}), {c['return']:.3f} "
                                        f"({c['return_se']:.3f})"
                                        for who, c in ((who, r["cells"][name]) for who, r in shown_by)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=sorted(RECIPES), default="minigrid")
    parser.add_argument("--recipe", choices=("cpu", "smoke", "gpu", "cpu-rl-lr1e-4"), default="cpu")
    parser.add_argument("--reuse-from", default="", help="a logged run whose warm-up (and sft arms, when only the "
                        "RL learning rate differs) this run takes instead of training them again")
    parser.add_argument("--run-name", default="", help="names the run in the log (default: the recipe's name for "
                        "minigrid, <task>-<recipe> otherwise)")
    parser.add_argument("--log", type=Path, default=ROOT / "reports" / "bench_generalisation.jsonl")
    parser.add_argument("--work", default="", help="folder of the warm-up checkpoint (default: "
                        "data/bench_generalisation/<run name>)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--stage", choices=("warmup", "arm"), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--arm", choices=("rl", "sft"), default="rl", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--arms", nargs="+", choices=("rl", "sft"), default=["rl", "sft"],
                        help="the arms this invocation trains (the others: logged, or --reuse-from)")
    parser.add_argument("--seeds", nargs="+", type=int, default=None,
                        help="the recipe's seeds this invocation trains (default: all of them; the table shows all)")
    parser.add_argument("--table", action="store_true", help="print the table of the logged run and stop")
    args = parser.parse_args()
    if args.recipe not in RECIPES[args.task]:
        parser.error(f"task {args.task} has the recipes {', '.join(RECIPES[args.task])}, not {args.recipe!r}")
    recipe = RECIPES[args.task][args.recipe]
    args.run_name = args.run_name or (args.recipe if args.task == "minigrid" else f"{args.task}-{args.recipe}")
    args.work = args.work or str(ROOT / "data" / "bench_generalisation" / args.run_name)
    if args.table:
        if args.reuse_from:
            reuse(args, recipe)
        print_table(records(args.log, args.run_name), args.task, recipe)
        return
    if args.stage is None:
        main_run(args, recipe)
        return
    quiet_model_logs(recipe.threads)
    torch.manual_seed(args.seed)
    (warmup if args.stage == "warmup" else arm)(args, recipe)


if __name__ == "__main__":
    main()
