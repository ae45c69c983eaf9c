"""A Gymnasium grid through the model's eyes: success rate on MiniGrid after RL, against a random policy and a
same-time supervised control trained on a planner's shortest paths.

``kind = "gymnasium"`` (``envs.gymnasium_env``): each turn shows the rendered grid and asks for one of
``left / right / forward``; the environment's reward (MiniGrid: 1 - 0.9 x steps / max_steps on reaching
the goal, else 0) is the episode's, success is reaching the goal within ``--max-turns`` replies. From the
embedded tiny model (random weights), per seed:

- **random**: a uniformly random action every turn (no model), ``--random-repeats`` episodes per
  held-out seed;
- **RL**: ``--rl-steps`` GRPO steps (the training defaults but ``kl_coef`` 0, ``--prompts`` episodes of
  ``--group`` samples a step, ``--learning-rate``) on training episodes;
- **control**: supervised steps on the planner's shortest paths (``envs.minigrid_planner``: breadth-first
  search on the grid), each episode teacher-forced turn by turn (``rl.step.scripted_episodes``: every
  reply an action word of the path, the environment's turns between), ``--prompts`` episodes a step at
  the same learning rate, for the RL phase's training seconds (at least one step).

Then each policy, greedy, plays the fixed held-out episodes (split ``test``, seed 0): success rate
± its binomial standard error, with n. The start model is scored too. Whichever wins is printed as
measured. ``MiniGrid-Empty-5x5-v0`` starts every episode at the same cell facing the same way, so its
held-out episodes differ only by seed and a greedy policy succeeds on all or none of them;
``--env-id MiniGrid-Empty-Random-5x5-v0`` varies the start.

    python benchmarks/bench_gymnasium.py                                          # the docs/measured.md run
    python benchmarks/bench_gymnasium.py --rl-steps 1 --eval-episodes 4 --seeds 0 # smoke
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import tempfile
import time
from pathlib import Path

import torch
from quiet_logs import quiet_model_logs

from aerorl_ops.config.training import TRAINING_DEFAULTS
from aerorl_ops.envs.gymnasium_env import GymnasiumEnv
from aerorl_ops.envs.registry import make_env
from aerorl_ops.envs.types import Completion
from aerorl_ops.models.embedded_default import build_tiny_qwen2vl
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rl.runtime.policy import policy_and_reference
from aerorl_ops.rl.step.multi_turn import sample_episodes
from aerorl_ops.rl.step.scripted_episodes import scripted_batch
from aerorl_ops.rl.step.sequences import completion_logprobs
from aerorl_ops.rl.step.trainer import RLTrainer

ACTIONS = ["left", "right", "forward"]


def cell(successes: int, n: int) -> str:
    rate = successes / n
    return f"{rate:.3f} ± {math.sqrt(rate * (1 - rate) / n):.3f} (n = {n})"


def grid(args: argparse.Namespace, split: str, limit: int, seed: int) -> GymnasiumEnv:
    return make_env("gymnasium", env_id=args.env_id, actions=ACTIONS, split=split, limit=limit, seed=seed,
                    max_turns=args.max_turns, env_kwargs={"tile_size": args.tile_size})


def random_successes(env: GymnasiumEnv, repeats: int, seed: int) -> tuple[int, int]:
    """Episodes of a uniformly random action every turn: (successes, episodes)."""
    draw, successes = random.Random(seed), 0
    for _ in range(repeats):
        for item in env.items:
            state, _ = env.reset(item)
            while True:
                result = env.step(state, Completion(draw.choice(ACTIONS)))
                if result.done:
                    successes += result.info.correct
                    break
                state = result.state
    return successes, repeats * len(env)


def greedy_successes(loaded: LoadedVLM, env: GymnasiumEnv, max_new_tokens: int, batch: int = 16) -> tuple[int, int]:
    """The greedy policy's episodes on every item of ``env``: (successes, episodes)."""
    successes = 0
    for start in range(0, len(env), batch):
        successes += int(sample_episodes(loaded, env, env.items[start:start + batch], max_new_tokens,
                                         None).graded.correct.sum())
    return successes, len(env)


def supervised_step(trainer: RLTrainer, env: GymnasiumEnv, items, plans) -> float:
    """One update on the planner's episodes, teacher-forced: the token-mean NLL of their replies."""
    loaded = trainer.policy.loaded
    batch = scripted_batch(loaded, env, items, plans)
    loss = -completion_logprobs(loaded.model, batch).logprobs.mean()  # []
    trainer.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    trainer.optimizer.step()
    return float(loss.detach())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env-id", default="MiniGrid-Empty-5x5-v0")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--rl-steps", type=int, default=5)
    parser.add_argument("--prompts", type=int, default=4, help="episodes per RL step (and per supervised step)")
    parser.add_argument("--group", type=int, default=4, help="RL samples per episode")
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=8, help="per reply ('forward' is 5 tokens + end)")
    parser.add_argument("--train-episodes", type=int, default=64)
    parser.add_argument("--eval-episodes", type=int, default=32)
    parser.add_argument("--random-repeats", type=int, default=20)
    parser.add_argument("--tile-size", type=int, default=8, help="pixels per grid cell of the rendered frame")
    parser.add_argument("--learning-rate", type=float, default=TRAINING_DEFAULTS.learning_rate)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    args = parser.parse_args()
    began = time.perf_counter()
    quiet_model_logs(args.threads)
    start = str(build_tiny_qwen2vl(Path(tempfile.mkdtemp(prefix="aerorl-gymnasium-")) / "tiny"))
    settings = dataclasses.replace(TRAINING_DEFAULTS, kl_coef=0.0, learning_rate=args.learning_rate,
                                   group_size=args.group, prompts_per_step=args.prompts,
                                   max_new_tokens=args.max_new_tokens)
    test = grid(args, "test", args.eval_episodes, 0)
    print(f"== {args.env_id}, up to {args.max_turns} turns, {len(test)} held-out episodes; from the embedded tiny "
          f"model: {args.rl_steps} RL steps ({args.prompts} episodes x {args.group} samples) vs a same-time "
          f"supervised control on the planner's paths, lr {args.learning_rate}, seeds {args.seeds}, "
          f"torch threads {torch.get_num_threads()}")
    print(f"   {'random':>8}: {cell(*random_successes(test, args.random_repeats, 0))}")
    start_policy, _ = policy_and_reference(start, settings, device="cpu")
    print(f"   {'start':>8}: {cell(*greedy_successes(start_policy.loaded, test, args.max_new_tokens))}")
    for seed in args.seeds:
        config = dataclasses.replace(settings, seed=seed)
        train = grid(args, "train", args.train_episodes, seed)
        draw = random.Random(seed)
        policy, _ = policy_and_reference(start, config, device="cpu")
        trainer = RLTrainer(config.resolve(), policy)
        rl_seconds, rewards = 0.0, []
        for _ in range(args.rl_steps):
            stats = trainer.rl_step(train, draw.sample(range(len(train)), args.prompts))
            rl_seconds += stats.step_s
            rewards.append(stats.reward_mean)
        print(f"-- seed {seed}: RL reward per step {[round(r, 3) for r in rewards]}")
        print(f"   {'RL':>8}: {cell(*greedy_successes(policy.loaded, test, args.max_new_tokens))} after "
              f"{rl_seconds:.0f} s of training")
        control, _ = policy_and_reference(start, config, device="cpu")
        supervised = RLTrainer(config.resolve(), control)
        plans = {item.item_id: list(train.planned_actions(item)) for item in train.items}
        spent, steps, losses = 0.0, 0, []
        while steps == 0 or spent < rl_seconds:
            started = time.perf_counter()
            items = [train.items[k] for k in draw.sample(range(len(train)), args.prompts)]
            losses.append(supervised_step(supervised, train, items, [plans[item.item_id] for item in items]))
            spent += time.perf_counter() - started
            steps += 1
        print(f"   {'control':>8}: {cell(*greedy_successes(control.loaded, test, args.max_new_tokens))} after "
              f"{spent:.0f} s of training ({steps} steps, NLL {losses[0]:.2f} -> {losses[-1]:.2f})")
    print(f"== {time.perf_counter() - began:.0f} s wall")


if __name__ == "__main__":
    main()
